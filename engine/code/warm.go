package code

// Sandboxes started before the job arrives. Creating, attaching and starting
// a container and greeting its supervisor takes 140–600 ms, every job, before
// anything compiles; a warm sandbox has done all of that already. It is a
// user sandbox like any other — its own work dir, its own uid pair, the
// mounts and limits of a job's — created for no job yet: the first job of
// its image that fits takes it, renames its work dir to the job's and raises
// its memory to the job's, and it is removed with the job like a sandbox
// started for it. No sandbox ever serves two jobs, so isolation is what it
// was. The pool refills in the background (Prewarm's goroutine) and empties
// when Prewarm's context ends.
//
// Which tasks take one: those whose user sandbox needs nothing a warm one
// lacks — no interaction pipes (interactive and communication tasks mount
// them) and no enlarged /tmp (file I/O tasks). The others start their own.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/kece-oj/kece/engine"
)

// roleWarm labels a sandbox started before its job (LabelRole).
const roleWarm = "warm"

// warmJobName stands in for the job id in a waiting sandbox's work dir name
// until a job takes it and renames the dir after itself.
const warmJobName = "warm"

// warmRetryDefault is how long the pool waits after a failed start (the
// daemon down, the image missing) before it tries again.
const warmRetryDefault = 5 * time.Second

// warmSandbox is one started sandbox waiting for a job.
type warmSandbox struct {
	s                  *session
	dir                string // host work dir
	compileUID, runUID int
	image, imageID     string
	limit              int64 // its memory cgroup limit
}

// warmPool holds the waiting sandboxes and the ones jobs took.
type warmPool struct {
	mu    sync.Mutex
	ready map[string][]*warmSandbox // by image reference
	// taken maps a taken sandbox's container id to the lease of its job,
	// until the job removes it (the janitor keeps it while that lease lives).
	taken map[string]leaseRef
	// starting holds the containers of sandboxes being started, which the
	// janitor must not take for leftovers either.
	starting map[string]bool
	wake     chan struct{}
}

type leaseRef struct {
	job   string
	epoch int64
}

func newWarmPool() *warmPool {
	return &warmPool{ready: map[string][]*warmSandbox{}, taken: map[string]leaseRef{}, starting: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// warmable says whether a task's user sandbox can be a warm one.
func warmable(t engine.Task) bool {
	return !t.Checker.Interacts() && ioWorkBytes(t) == 0
}

// Prewarm keeps n started sandboxes ready for each distinct image of specs
// (a pool's languages share one) until ctx ends, then removes those no job
// took. It blocks: the node runs it in a goroutine it owns. A start that
// fails is logged and tried again after a pause. n ≤ 0 keeps none.
//
// A sandbox starts with the memory cgroup of the first spec of its image
// compiling there (its compile budget), so that a job of that language,
// the common one, takes it without a change of limits; another job's limits
// are set when it takes it (useWarm).
func (x *Executor) Prewarm(ctx context.Context, specs []engine.RuntimeSpec, n int) {
	defer x.warm.empty(ctx)
	if n <= 0 {
		return
	}
	var images []string
	budget := map[string]int64{}
	for _, s := range specs {
		if _, ok := budget[s.Image]; !ok {
			images = append(images, s.Image)
			budget[s.Image] = s.CompileMemoryBytes
		}
	}
	for {
		failed := false
		for _, image := range images {
			for x.warm.count(image) < n && ctx.Err() == nil {
				if err := x.newWarm(ctx, image, budget[image]); err != nil {
					if ctx.Err() == nil {
						x.cfg.Logger.Warn("warm sandbox not started", "image", image, "error", err)
					}
					failed = true
					break
				}
			}
		}
		var retry <-chan time.Time
		if failed {
			retry = time.After(warmRetryDefault)
		}
		select {
		case <-ctx.Done():
			return
		case <-x.warm.wake:
		case <-retry:
		}
	}
}

// newWarm starts one sandbox of image for no job yet, with the memory
// cgroup of a program of memory bytes, and puts it in the pool.
func (x *Executor) newWarm(ctx context.Context, image string, memory int64) error {
	imageID, err := x.checkImage(ctx, image)
	if err != nil {
		return err
	}
	var r [10]byte
	if _, err := rand.Read(r[:]); err != nil {
		return engine.Infra(engine.InfraInternal, err)
	}
	w := &warmSandbox{image: image, imageID: imageID, limit: x.containerMemory(memory)}
	w.compileUID = uidBase + int(binary.BigEndian.Uint32(r[:4])%uidSpan)*2
	w.runUID = w.compileUID + 1
	w.dir = filepath.Join(x.cfg.Workspace, workDirName(x.cfg.NodeID, warmJobName, 0, hex.EncodeToString(r[4:])))
	if err := os.MkdirAll(w.dir, 0o711); err != nil {
		return hostErr("warm work dir", err)
	}
	for _, d := range userDirs {
		if err := mkdirOwned(filepath.Join(w.dir, d.sub), d.mode, 0); err != nil {
			os.RemoveAll(w.dir)
			return hostErr("warm work dir", err)
		}
	}
	w.s, err = x.startSession(ctx, sessionSpec{
		image: image, role: roleWarm, task: &engine.Task{}, memoryBytes: memory,
		mounts: workMounts(w.dir, "box"), build: &buildSpace{src: filepath.Join(w.dir, "src"), box: filepath.Join(w.dir, "box"), uid: w.compileUID},
		created: x.warm.started,
	})
	if err != nil {
		x.warm.startEnded(nil)
		os.RemoveAll(w.dir)
		return err
	}
	x.warm.startEnded(w)
	return nil
}

// take hands a waiting sandbox of image to the job (nil when none waits)
// and wakes the pool to start another.
func (p *warmPool) take(image, job string, epoch int64) *warmSandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.ready[image]
	if len(ws) == 0 {
		return nil
	}
	w := ws[len(ws)-1]
	p.ready[image] = ws[:len(ws)-1]
	p.taken[w.s.id] = leaseRef{job, epoch}
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return w
}

// done forgets a taken sandbox its job has removed.
func (p *warmPool) done(id string) {
	p.mu.Lock()
	delete(p.taken, id)
	p.mu.Unlock()
}

// started records a container being started for the pool.
func (p *warmPool) started(id string) {
	p.mu.Lock()
	p.starting[id] = true
	p.mu.Unlock()
}

// startEnded ends a start (Prewarm starts one at a time): a started
// sandbox (w) moves from starting to ready in one step, so the janitor
// never sees it as neither; after a failure (w nil) startSession has
// removed what it made.
func (p *warmPool) startEnded(w *warmSandbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.starting)
	if w != nil {
		p.ready[w.image] = append(p.ready[w.image], w)
	}
}

func (p *warmPool) count(image string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[image])
}

// keep says whether the janitor must leave a warm sandbox's container: it
// waits in the pool, or a job whose lease is live took it. Any other is a
// leftover (of an earlier process, or of a job that could not remove it).
func (p *warmPool) keep(id string, live func(job string, epoch int64) bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.taken[id]; ok {
		return live(l.job, l.epoch)
	}
	if p.starting[id] {
		return true
	}
	for _, ws := range p.ready {
		for _, w := range ws {
			if w.s.id == id {
				return true
			}
		}
	}
	return false
}

// keepsDir says whether a work dir (by name) belongs to a waiting sandbox.
func (p *warmPool) keepsDir(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ws := range p.ready {
		for _, w := range ws {
			if filepath.Base(w.dir) == name {
				return true
			}
		}
	}
	return false
}

// empty removes every waiting sandbox and its work dir.
func (p *warmPool) empty(ctx context.Context) {
	p.mu.Lock()
	all := p.ready
	p.ready = map[string][]*warmSandbox{}
	p.mu.Unlock()
	for _, ws := range all {
		for _, w := range ws {
			w.s.close(ctx)
			os.RemoveAll(w.dir)
		}
	}
}

// adopt makes a taken sandbox the job's: its work dir renamed to the job's
// (the container's bind mounts follow the directory), its uid pair the
// job's. The sandbox's memory is raised to the job's when it starts
// (useWarm), once the image is known to be the one it runs.
func (j *job) adopt(w *warmSandbox, dir string) error {
	if err := os.Rename(w.dir, dir); err != nil {
		return hostErr("warm work dir", err)
	}
	w.dir = dir
	w.s.build = &buildSpace{src: filepath.Join(dir, "src"), box: filepath.Join(dir, "box"), uid: w.compileUID}
	j.dir, j.compileUID, j.runUID, j.warm = dir, w.compileUID, w.runUID, w
	return nil
}

// useWarm makes the adopted sandbox the user's session when it runs the
// image the task names now (imageID), with the job's memory; false when
// it does not (the image tag moved), after removing it.
func (j *job) useWarm(ctx context.Context, imageID string) (bool, error) {
	w := j.warm
	if w == nil {
		return false, nil
	}
	j.warm = nil
	if w.imageID != imageID {
		w.s.close(ctx)
		j.x.warm.done(w.s.id)
		return false, nil
	}
	j.userSession = w.s
	limit := j.x.containerMemory(j.startMemory()) + j.workBytes
	if limit == w.limit {
		return true, nil
	}
	dctx, cancel := context.WithTimeout(ctx, j.x.cfg.DaemonTimeout)
	defer cancel()
	if _, err := j.x.cli.ContainerUpdate(dctx, w.s.id, client.ContainerUpdateOptions{
		Resources: &container.Resources{Memory: limit, MemorySwap: limit},
	}); err != nil {
		return false, j.x.classifyDaemon(ctx, fmt.Sprintf("raise warm sandbox %s to the job's memory", short(w.s.id)), err)
	}
	return true, nil
}
