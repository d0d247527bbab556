package lease

// Slot weights (docs/scheduling.md, "Slot weights"). A job holds
// slot_weight of its node's slots and of its host group's capacity while it
// runs: the sandboxed programs it runs at once (manifest.SlotWeight: 1, 2
// for an interactive problem, processes + 1 for a communication task). A
// claim's in-flight count sums the weights of the RUNNING jobs, and a job is
// handed to a call only where its weight fits all three rooms: what the node
// said it has free (the call's free slots), the node's slots less its
// in-flight weight, and the group's capacity less the group's.
//
// A job heavier than its node's slots (or its group's capacity) cannot fit
// them, so it needs the whole node (group) instead: it is handed out only
// when nothing else runs there, and while it runs its full weight is
// counted, so nothing else starts there until it ends. Such a job is
// judged, not refused: the sandboxes it starts share the node's cores.
//
// Jobs are handed out in queue order. A job that fits no call of the batch
// ends the pick of its capabilities: the lighter jobs behind it are not
// handed out past it, so a heavy job is not overtaken for ever by light
// ones taking every slot as it frees; it waits until a node has room,
// which the nodes' finishing jobs make (the node's slot cycle asks for
// every slot it then has free, worker/job.go). With weights of 1 this is
// the plain rule of before: each call takes up to its room, in call order.

// slotRooms is the room left in one claim transaction: per call, per node
// and per host group, in slots, and the jobs each call was handed.
type slotRooms struct {
	batchMax            int
	call, jobs          []int
	node, group         map[int64]int
	nodeSlots, groupCap map[int64]int
}

// newSlotRooms is the room of the calls before anything is handed out:
// each call's free slots, each node's slots and each group's capacity less
// their in-flight weight (busy, counted after the locks).
func newSlotRooms(calls []claimCall, lock *groupNodeLocks, busy *busyCounts, batchMax int) *slotRooms {
	r := &slotRooms{batchMax: batchMax, call: make([]int, len(calls)), jobs: make([]int, len(calls)),
		node: make(map[int64]int), group: make(map[int64]int, len(lock.capacity)),
		nodeSlots: make(map[int64]int), groupCap: lock.capacity}
	for g, c := range lock.capacity {
		r.group[g] = c - busy.group[g]
	}
	for i, c := range calls {
		r.call[i] = c.free
		n := lock.nodes[c.sess.NodeID]
		r.nodeSlots[c.sess.NodeID] = n.slots
		r.node[c.sess.NodeID] = n.slots - busy.node[c.sess.NodeID]
	}
	return r
}

// need is the room a job of weight w needs in a room of total slots: its
// weight, or all of them when it is heavier.
func need(w, total int) int { return max(min(w, total), 1) }

// room is at most how many slots call i can still be handed: the candidate
// reads ask for that many jobs (every job weighs at least one slot).
func (r *slotRooms) room(i int, c claimCall) int {
	return max(min(r.call[i], r.node[c.sess.NodeID], r.group[c.group], r.batchMax-r.jobs[i]), 0)
}

// fits says whether call i can be handed a job of weight w.
func (r *slotRooms) fits(i int, c claimCall, w int) bool {
	n := need(w, r.nodeSlots[c.sess.NodeID])
	return r.jobs[i] < r.batchMax && r.call[i] >= n && r.node[c.sess.NodeID] >= n &&
		r.group[c.group] >= need(w, r.groupCap[c.group])
}

// take hands call i a job of weight w (its whole weight is counted, also
// when it needed less: a heavy job).
func (r *slotRooms) take(i int, c claimCall, w int) {
	r.call[i] -= w
	r.node[c.sess.NodeID] -= w
	r.group[c.group] -= w
	r.jobs[i]++
}

// assign hands jobs (in queue order) to the calls at indexes at: each job
// to the first of them it fits, appended to the call's answer. The first
// job that fits none ends it, so nothing behind it is handed out. It
// returns how many jobs it handed out.
func (r *slotRooms) assign(calls []claimCall, at []int, jobs []ClaimedJob, out []claimAnswer) int {
	for k, j := range jobs {
		w := max(j.Slots, 1)
		i := -1
		for _, c := range at {
			if r.fits(c, calls[c], w) {
				i = c
				break
			}
		}
		if i < 0 {
			return k
		}
		r.take(i, calls[i], w)
		out[i].jobs = append(out[i].jobs, j)
	}
	return len(jobs)
}

// sizing works out, in call order, how many slots each live call may be
// handed of pool work, each node's and group's room shared by their calls
// as claims one after the other would share them: the candidate read of
// the batch asks for their sum. It is only the read's size; the pick hands
// out jobs by slotRooms.
func (r *slotRooms) sizing(calls []claimCall, live []int) []int {
	node := make(map[int64]int, len(r.node))
	group := make(map[int64]int, len(r.group))
	for _, i := range live {
		c := calls[i]
		if _, ok := node[c.sess.NodeID]; !ok {
			node[c.sess.NodeID] = r.node[c.sess.NodeID]
		}
		if _, ok := group[c.group]; !ok {
			group[c.group] = r.group[c.group]
		}
	}
	want := make([]int, len(calls))
	for _, i := range live {
		c := calls[i]
		want[i] = max(min(r.call[i], node[c.sess.NodeID], group[c.group], r.batchMax-r.jobs[i]), 0)
		node[c.sess.NodeID] -= want[i]
		group[c.group] -= want[i]
	}
	return want
}
