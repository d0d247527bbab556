package contracts

// Scores are part of the contract: a case score is fraction × weight rounded
// half away from zero to a whole number of 1/ScoreScale points, and a job's
// score is the exact sum of its case scores. Both sides use the same scale:
// the node when it computes scores (engine.ScoreScale, which must equal this
// one; worker tests check that) and the control plane when it validates them.

// ScoreScale is the number of score units in one point (4 decimal places).
const ScoreScale = 10_000
