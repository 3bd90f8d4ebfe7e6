package shared

import "testing"

type config struct{ endpoint string } // not zero-sized: two of them have two addresses
type component struct{ forget func() }

// One component per entry until it is forgotten; a forgotten one's forget does not drop
// the entry's next.
func TestByConfig(t *testing.T) {
	var s ByConfig[config, *component]
	a, b := &config{}, &config{}
	newC := func(forget func()) *component { return &component{forget: forget} }
	first := s.Get(a, newC)
	if s.Get(a, newC) != first || s.Get(b, newC) == first {
		t.Fatal("not one component per entry")
	}
	first.forget()
	second := s.Get(a, newC)
	if second == first {
		t.Fatal("a forgotten component was handed out again")
	}
	first.forget()
	if s.Get(a, newC) != second {
		t.Error("a stale forget dropped the entry's next component")
	}
}
