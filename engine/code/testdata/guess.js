// Guess-the-number contestant in JavaScript (see interactor.cpp and
// guess.cpp): the word the interactor sends chooses the behaviour. Reads
// and writes go through fs on descriptors 0 and 1, synchronously, as an
// interactive program must (no buffering past a line it has to answer).
const fs = require("fs");

let pending = "";
function readLine() {
  const buf = Buffer.alloc(64);
  for (;;) {
    const nl = pending.indexOf("\n");
    if (nl >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      return line;
    }
    const n = fs.readSync(0, buf, 0, buf.length, null);
    if (n === 0) return null;
    pending += buf.toString("utf8", 0, n);
  }
}

const [nText, word] = readLine().trim().split(/\s+/);
const n = Number(nText);
if (word === "tle") {
  let x = 0;
  for (;;) x++;
}
if (word === "idle") {
  readLine();
  process.exit(0);
}
if (word === "flood") {
  for (;;) fs.writeSync(1, "1\n");
}
if (word === "re") process.exit(3);
if (word === "peek") {
  for (const p of ["/pipe", "/exp/0", "/in/0", "/cin/0"]) {
    try {
      fs.closeSync(fs.openSync(p, "r"));
      process.exit(42);
    } catch (e) {
      // not ours to read: as expected
    }
  }
}
let lo = 1, hi = n, step = 1;
for (;;) {
  let g;
  if (word === "linear") g = step++;
  else g = Math.floor((lo + hi) / 2);
  fs.writeSync(1, g + "\n");
  const r = readLine();
  if (r === null || r.trim() === "=" || r.trim() === "") break;
  if (r.trim() === "<") hi = g - 1;
  else lo = g + 1;
}
