package summary

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
)

// Metrics folds a batch of metrics in: the roofs, and MoE selections, which count every
// traced graph even where spans are thinned.
func (a *Aggregator) Metrics(md pmetric.Metrics) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if _, ok := rm.Resource().Attributes().Get(schema.ResourceProcessPID); !ok {
			continue // the receiver's own health
		}
		a.touch(rm.Resource())
		var p *proc
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Name() {
				case metadata.MetricsInfo.ProfinferRooflinePeak.Name:
					p = cmp.Or(p, a.process(rm.Resource()))
					p.roof(m.Gauge().DataPoints())
				case metadata.MetricsInfo.ProfinferRooflineCacheBandwidth.Name:
					p = cmp.Or(p, a.process(rm.Resource()))
					p.cacheRoofs(m.Gauge().DataPoints())
				case metadata.MetricsInfo.GgmlMoeExpertSelections.Name:
					p = cmp.Or(p, a.process(rm.Resource()))
					p.selections(m.Sum().DataPoints())
				case metadata.MetricsInfo.ProfinferWindowNext.Name:
					p = cmp.Or(p, a.process(rm.Resource()))
					if dps := m.Gauge().DataPoints(); dps.Len() > 0 {
						dp := dps.At(dps.Len() - 1)
						p.nextWindow = dp.Timestamp().AsTime().Add(time.Duration(dp.DoubleValue() * float64(time.Second)))
					}
				case metadata.MetricsInfo.ProfinferProcessCpus.Name:
					p = cmp.Or(p, a.process(rm.Resource()))
					p.cpusMetric(m.Gauge().DataPoints())
				case metadata.MetricsInfo.ProfinferProcessCpusTime.Name:
					p = cmp.Or(p, a.process(rm.Resource()))
					p.neighbours(m.Sum().DataPoints())
				case metadata.MetricsInfo.ProfinferCgroupCPULimit.Name, metadata.MetricsInfo.ProfinferCgroupCPUPeriods.Name, metadata.MetricsInfo.ProfinferCgroupCPUThrottledPeriods.Name, metadata.MetricsInfo.ProfinferCgroupCPUThrottledTime.Name:
					p = cmp.Or(p, a.process(rm.Resource()))
					p.quotaMetric(m)
				}
			}
		}
	}
}

func (p *proc) roof(dps pmetric.NumberDataPointSlice) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		attrs := dp.Attributes()
		v := dp.DoubleValue()
		switch schema.Str(attrs, schema.GGMLRooflineRoof) {
		case "flops":
			p.roofs.FLOPS = v
		case "bandwidth":
			p.roofs.Bandwidth = v
		case "int8":
			p.roofs.Int8 = v
		case "bf16":
			p.roofs.BF16 = v
		}
		p.roofs.Source = schema.Str(attrs, schema.ProfinferRooflineSource)
		p.roofs.Measured = schema.Str(attrs, schema.ProfinferRooflineMeasured)
	}
}

// cacheRoofs keeps the latest batch's cache levels, nearest first.
func (p *proc) cacheRoofs(dps pmetric.NumberDataPointSlice) {
	p.roofs.Caches = nil // a snapshot may hold the last batch's
	for i := 0; i < dps.Len(); i++ {
		attrs := dps.At(i).Attributes()
		l := roofline.Level{Name: schema.Str(attrs, schema.ProfinferRooflineCacheLevel),
			Size: schema.Int(attrs, schema.ProfinferRooflineCacheSize), Bandwidth: dps.At(i).DoubleValue()}
		if i := slices.IndexFunc(p.roofs.Caches, func(c roofline.Level) bool { return c.Name == l.Name }); i >= 0 {
			p.roofs.Caches[i] = l
			continue
		}
		p.roofs.Caches = append(p.roofs.Caches, l)
	}
	slices.SortFunc(p.roofs.Caches, func(x, y roofline.Level) int { return strings.Compare(x.Name, y.Name) })
}

func (p *proc) selections(dps pmetric.NumberDataPointSlice) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		layer := int(schema.Int(dp.Attributes(), schema.GGMLLayer))
		e := int(schema.Int(dp.Attributes(), schema.GGMLMoEExpert))
		if e < 0 || e >= maxExperts || layer < 0 || layer >= maxLayers {
			continue
		}
		c := p.moeMetric[layer]
		if e >= len(c) {
			c = append(c, make([]int64, e+1-len(c))...)
		}
		c[e] = dp.IntValue() // cumulative: the newest count is the count
		p.moeMetric[layer] = c
	}
}

// cpusMetric reads the CPUs the process may run on, as last read: the points of one
// export replace the last's.
func (p *proc) cpusMetric(dps pmetric.NumberDataPointSlice) {
	c := CPUs{}
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		switch schema.Str(dp.Attributes(), schema.ProfinferCPUsKind) {
		case "allowed":
			c.Allowed = int(dp.IntValue())
		case "cores":
			c.Cores = int(dp.IntValue())
		case "performance":
			c.Performance = int(dp.IntValue())
		}
	}
	if c.Allowed > 0 {
		p.cpus = c
	}
}

// neighbours reads how long the CPUs the process may run on sat idle while it computed,
// and their time: cumulative, the newest is the sum.
func (p *proc) neighbours(dps pmetric.NumberDataPointSlice) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		switch schema.Str(dp.Attributes(), schema.ProfinferCPUsTimeOf) {
		case "idle":
			p.idleTime = dp.DoubleValue()
		case "all":
			p.cpusTime = dp.DoubleValue()
		case "process":
			p.ownTime = dp.DoubleValue()
		}
	}
}

// quotaMetric reads one of the cgroup quota metrics. Throttling counts from the first
// reading of the cgroup, so that it is what happened while profiled.
func (p *proc) quotaMetric(m pmetric.Metric) {
	var dps pmetric.NumberDataPointSlice
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps = m.Gauge().DataPoints()
	case pmetric.MetricTypeSum:
		dps = m.Sum().DataPoints()
	default:
		return
	}
	q := &p.quota
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if path := schema.Str(dp.Attributes(), schema.ProfinferCgroupPath); path != q.cgroup {
			*q = quotaState{cgroup: path}
		}
		v := dp.DoubleValue()
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			v = float64(dp.IntValue())
		}
		switch m.Name() {
		case metadata.MetricsInfo.ProfinferCgroupCPULimit.Name:
			q.cpus = v
		case metadata.MetricsInfo.ProfinferCgroupCPUPeriods.Name:
			q.periods.set(v)
		case metadata.MetricsInfo.ProfinferCgroupCPUThrottledPeriods.Name:
			q.throttled.set(v)
		case metadata.MetricsInfo.ProfinferCgroupCPUThrottledTime.Name:
			q.throttledTime.set(v)
		}
	}
}

// quotaState is a cgroup CPU quota as the metrics gave it.
type quotaState struct {
	cgroup                            string
	cpus                              float64
	periods, throttled, throttledTime counter
}

// counter is a cumulative metric's first and latest values.
type counter struct {
	first, last float64
	seen        bool
}

func (c *counter) set(v float64) {
	if !c.seen {
		c.first, c.seen = v, true
	}
	c.last = v
}

// delta is the count between the first and the latest reading, or, all: the count since
// the counter began.
func (c counter) delta(all bool) float64 {
	if all {
		return c.last
	}
	return c.last - c.first
}
