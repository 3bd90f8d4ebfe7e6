package probe

import (
	"io"
	"sync"
	"time"

	"github.com/cilium/ebpf/link"
)

// Pool holds the lasting probes (decodes, graphs, splits, copies), each placed once per
// file for every process that maps it rather than once per process: a process's start
// and exit then place and remove none. Placing and removing them were most of what a
// short process, a llama-bench run, cost the collector: some 12 links, whose removal
// alone waits out a grace period each. The programs skip the processes that are not
// traced (Trace), so a file's probes serve the traced processes only, and cost an
// untraced process that maps the file a trap a hit.
//
// A probe stays placed while a process holds it, and for Linger after the last lets go,
// so that the next run of a binary finds it in place; Sweep removes it after that.
type Pool struct {
	mu     sync.Mutex
	placed map[placement]*placed
}

// Linger is how long a probe no process holds stays placed.
const Linger = time.Minute

// placement is where a probe sits: a function's entry or return, in one file.
type placement struct {
	dev, inode, at uint64
	ret            bool
}

type placed struct {
	link     link.Link
	emulated bool
	users    int
	idle     time.Time // when users fell to 0
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{placed: map[placement]*placed{}} }

// hold returns the probe at where, placing it with place if none is: each program reads
// only the structures of the file it is placed in, which are the same for every process
// that maps the file, so the first process's program serves them all. Its Close lets go.
func (p *Pool) hold(where placement, place func() (link.Link, bool, error)) (io.Closer, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.placed[where]
	if pl == nil {
		l, emulated, err := place()
		if err != nil {
			return nil, false, err
		}
		pl = &placed{link: l, emulated: emulated}
		p.placed[where] = pl
	}
	pl.users++
	return &held{pool: p, placed: pl}, pl.emulated, nil
}

// held is one process's hold on a pooled probe.
type held struct {
	pool   *Pool
	placed *placed
	once   sync.Once
}

// Close lets go of the probe; it stays placed for Linger.
func (h *held) Close() error {
	h.once.Do(func() {
		h.pool.mu.Lock()
		defer h.pool.mu.Unlock()
		if h.placed.users--; h.placed.users == 0 {
			h.placed.idle = time.Now()
		}
	})
	return nil
}

// Sweep takes out of the pool the probes no process has held for Linger, as of now, and
// returns them for the caller to close.
func (p *Pool) Sweep(now time.Time) Links {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gone Links
	for where, pl := range p.placed {
		if pl.users == 0 && now.Sub(pl.idle) >= Linger {
			gone = append(gone, pl.link)
			delete(p.placed, where)
		}
	}
	return gone
}

// Close removes every probe in the pool, held or not.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var all Links
	for where, pl := range p.placed {
		all = append(all, pl.link)
		delete(p.placed, where)
	}
	return all.Close()
}
