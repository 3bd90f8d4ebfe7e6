package schema

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The readers of what the schema names, shared by every fold of profinfer's pdata: the
// summary and the comparison read spans the same way.

// EachSpan calls f on every span of rs, in order.
func EachSpan(rs ptrace.ResourceSpans, f func(ptrace.Span)) {
	for j := 0; j < rs.ScopeSpans().Len(); j++ {
		spans := rs.ScopeSpans().At(j).Spans()
		for k := 0; k < spans.Len(); k++ {
			f(spans.At(k))
		}
	}
}

// Seconds is span s's duration; 0 where it ends before it starts.
func Seconds(s ptrace.Span) float64 {
	if s.EndTimestamp() < s.StartTimestamp() {
		return 0
	}
	return float64(s.EndTimestamp()-s.StartTimestamp()) / 1e9
}

// Str reads attribute k of m as text; "" where it is absent.
func Str(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return ""
}

// Bool says whether attribute k of m is the bool true.
func Bool(m pcommon.Map, k string) bool {
	v, ok := m.Get(k)
	return ok && v.Type() == pcommon.ValueTypeBool && v.Bool()
}

// Int reads attribute k of m as Integer does; 0 where it is absent.
func Int(m pcommon.Map, k string) int64 {
	if v, ok := m.Get(k); ok {
		return Integer(v)
	}
	return 0
}

// Integer reads an int attribute, or a double one, or a decimal string (OTLP JSON may
// carry ints as strings).
func Integer(v pcommon.Value) int64 {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		return int64(v.Double())
	case pcommon.ValueTypeStr:
		n, _ := strconv.ParseInt(v.Str(), 10, 64)
		return n
	}
	return 0
}

// Float reads attribute k of m as Number does; 0 where it is absent.
func Float(m pcommon.Map, k string) float64 {
	if v, ok := m.Get(k); ok {
		return Number(v)
	}
	return 0
}

// Number reads a double attribute, or an int one.
func Number(v pcommon.Value) float64 {
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		return v.Double()
	case pcommon.ValueTypeInt:
		return float64(v.Int())
	}
	return 0
}
