package probe

import "testing"

// Every probe that can be missing says what its absence costs, for the error that lists
// a stripped object's missing symbols.
func TestEveryProbeSaysWhatItsAbsenceLoses(t *testing.T) {
	for _, s := range specs {
		if !s.optional && loses[s.symbol] == "" {
			t.Errorf("probe on %s: no entry in loses", s.symbol)
		}
	}
	for sym := range loses {
		found := false
		for _, s := range specs {
			found = found || s.symbol == sym
		}
		if !found {
			t.Errorf("loses names %s, which no probe uses", sym)
		}
	}
}
