package registry

import (
	"sync"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/symbols"
)

// Files keeps parsed ELF files by identity, so that many processes of one binary and
// repeated discovery passes parse each file once. It is safe for concurrent use: the
// registry opens files as it inspects processes, the reader's backend resolvers as
// backends appear.
type Files struct {
	mu    sync.Mutex
	files map[[2]uint64]*symbols.File
	roles map[[2]uint64][]discover.Role
}

// NewFiles returns an empty cache.
func NewFiles() *Files {
	return &Files{files: map[[2]uint64]*symbols.File{}, roles: map[[2]uint64][]discover.Role{}}
}

// Get returns the file at a host path, identified by device and inode.
func (c *Files) Get(path string, dev, inode uint64) (*symbols.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]uint64{dev, inode}
	if f := c.files[k]; f != nil {
		return f, nil
	}
	f, err := symbols.Open(path)
	if err != nil {
		return nil, err
	}
	c.files[k] = f
	return f, nil
}

// Open returns the file module m maps.
func (c *Files) Open(m *discover.Module) (*symbols.File, error) {
	return c.Get(m.HostPath, m.Dev, m.Inode)
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
	found, err := symbols.Defines(path(), discover.RoleSymbol[:])
	if err != nil {
		return nil, err
	}
	for r, ok := range found {
		if ok {
			roles = append(roles, discover.Role(r))
		}
	}
	c.mu.Lock()
	c.roles[k] = roles
	c.mu.Unlock()
	return roles, nil
}

// Close closes every file.
func (c *Files) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, f := range c.files {
		f.Close()
		delete(c.files, k)
	}
}
