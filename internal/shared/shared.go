// Package shared keeps one component per configuration entry: the collector makes a
// component for each pipeline an entry is in (an exporter's traces and metrics, a
// connector's every pair of pipeline types), and those of one entry are to be one.
package shared

import "sync"

// ByConfig holds one V per *C, from its first Get until its forget is called (at its
// Shutdown). The zero value is ready.
type ByConfig[C any, V comparable] struct {
	mu sync.Mutex
	m  map[*C]V
}

// Get returns cfg's V, made with newV on the first call; newV is handed the forget that
// drops it, so that a collector reloading its config makes it anew.
func (s *ByConfig[C, V]) Get(cfg *C, newV func(forget func()) V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[cfg]; ok {
		return v
	}
	if s.m == nil {
		s.m = map[*C]V{}
	}
	var v V
	v = newV(func() { s.remove(cfg, v) })
	s.m[cfg] = v
	return v
}

func (s *ByConfig[C, V]) remove(cfg *C, v V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[cfg] == v {
		delete(s.m, cfg)
	}
}
