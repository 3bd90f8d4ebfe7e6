package registry

import (
	"sync"
	"time"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/symbols"
)

// Files keeps parsed ELF files by identity, so that many processes of one binary and
// repeated discovery passes parse each file once. It is safe for concurrent use: the
// registry opens files as it inspects processes, the reader's backend resolvers as
// backends appear.
//
// It is bounded however long the collector runs, and however many binaries come and go
// (each rebuild of llama.cpp is a new file): a parsed file that nobody asked for in
// FileLinger leaves it at the next Sweep, and past maxFiles the one asked for least
// recently leaves at once. Leaving the cache does not close a file: a traced process's
// probes and backend resolver may still hold it, and it is closed (by the garbage
// collector, which closes an unreachable os.File) once none does. The next process of
// that binary parses it again. The roles of the files classified are remembered up to
// maxRoles files, every executable object any process on the machine maps among them.
type Files struct {
	mu    sync.Mutex
	now   func() time.Time
	files map[[2]uint64]*parsed
	roles map[[2]uint64][]discover.Role
	// The bounds: maxFiles and maxRoles, which tests lower.
	maxFiles, maxRoles int
}

// parsed is a cached file and when it was last asked for.
type parsed struct {
	f    *symbols.File
	used time.Time
}

const (
	// FileLinger is how long a parsed file nobody asks for stays cached: a command run
	// again and again (llama-bench every few minutes) finds its binary parsed.
	FileLinger = 10 * time.Minute
	// maxFiles bounds the parsed files cached. A llama.cpp binary's symbols take a few
	// MB; a machine runs a few GGML binaries at once.
	maxFiles = 32
	// maxRoles bounds the files whose roles are remembered; past it, that cache starts
	// over. An entry is a few tens of bytes: every executable object mapped on the
	// machine is classified, and new ones keep coming (test binaries, builds).
	maxRoles = 8192
)

// NewFiles returns an empty cache.
func NewFiles() *Files {
	return &Files{now: time.Now, files: map[[2]uint64]*parsed{}, roles: map[[2]uint64][]discover.Role{},
		maxFiles: maxFiles, maxRoles: maxRoles}
}

// Get returns the file at a host path, identified by device and inode.
func (c *Files) Get(path string, dev, inode uint64) (*symbols.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]uint64{dev, inode}
	now := c.now()
	if p := c.files[k]; p != nil {
		p.used = now
		return p.f, nil
	}
	f, err := symbols.Open(path)
	if err != nil {
		return nil, err
	}
	if len(c.files) >= c.maxFiles {
		c.evictLRU()
	}
	c.files[k] = &parsed{f: f, used: now}
	return f, nil
}

// evictLRU drops the file asked for least recently.
func (c *Files) evictLRU() {
	var oldest [2]uint64
	var at time.Time
	first := true
	for k, p := range c.files {
		if first || p.used.Before(at) {
			oldest, at, first = k, p.used, false
		}
	}
	delete(c.files, oldest)
}

// Open returns the file module m maps.
func (c *Files) Open(m *discover.Module) (*symbols.File, error) {
	return c.Get(m.HostPath, m.Dev, m.Inode)
}

// Sweep drops the parsed files nobody asked for in FileLinger, as of now. They are not
// closed: see Files.
func (c *Files) Sweep(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, p := range c.files {
		if now.Sub(p.used) >= FileLinger {
			delete(c.files, k)
		}
	}
}

// Classify scans the file's symbol tables for the role symbols without parsing them:
// most mapped files (libc, libstdc++, the runtime itself) play no role. A file is scanned
// once; one that is not ELF, or cannot be read, is tried again at its next mapping.
func (c *Files) Classify(dev, inode uint64, path func() string) ([]discover.Role, error) {
	k := [2]uint64{dev, inode}
	c.mu.Lock()
	roles, ok := c.roles[k]
	c.mu.Unlock()
	if ok {
		return roles, nil
	}
	found, err := symbols.Defines(path(), discover.Classified)
	if err != nil {
		return nil, err
	}
	for r, ok := range found {
		if ok {
			roles = append(roles, discover.Role(r))
		}
	}
	c.mu.Lock()
	if len(c.roles) >= c.maxRoles {
		clear(c.roles)
	}
	c.roles[k] = roles
	c.mu.Unlock()
	return roles, nil
}

// Close closes every file cached.
func (c *Files) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, p := range c.files {
		p.f.Close()
		delete(c.files, k)
	}
}
