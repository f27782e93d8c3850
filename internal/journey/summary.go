package journey

import (
	"fmt"
	"sort"
	"time"
)

// milestones are the steps every pod that runs passes, in order; a
// summary measures the time between consecutive ones.
var milestones = []struct{ what, segment string }{
	{"Accepted", ""},
	{"Stored", "api-server: accept, validate, store"},
	{"Popped", "scheduler: wait in the queue"},
	{"Bound", "scheduler: pick a node, send the binding"},
	{"Seen", "kubelet: see the pod"},
	{"SandboxReady", "kubelet: sandbox and network"},
	{"Started", "kubelet: pull, create and start containers"},
	{"Running", "kubelet: report Running"},
	{"Ready", "kubelet: Ready"},
}

// SummaryRow is one segment of the journey across many pods.
type SummaryRow struct {
	Segment  string
	Count    int
	P50, P99 time.Duration
}

// Summarize measures, across pods, each segment between consecutive
// milestones that both happened (the last Started before Running), and
// the whole way from Accepted to Running.
func Summarize(pods []Pod) []SummaryRow {
	samples := make([][]time.Duration, len(milestones)+1)
	for _, p := range pods {
		times := make([]time.Time, len(milestones))
		for i, m := range milestones {
			for _, s := range p.Steps {
				if s.What != m.what {
					continue
				}
				if m.what == "Started" {
					if running := p.stepTime("Running"); !running.IsZero() && s.Time.After(running) {
						continue
					}
					times[i] = s.Time // the last start before Running
					continue
				}
				if times[i].IsZero() {
					times[i] = s.Time
				}
			}
		}
		for i := 1; i < len(milestones); i++ {
			if !times[i].IsZero() && !times[i-1].IsZero() {
				samples[i] = append(samples[i], times[i].Sub(times[i-1]))
			}
		}
		if accepted, running := times[0], p.stepTime("Running"); !accepted.IsZero() && !running.IsZero() {
			samples[len(milestones)] = append(samples[len(milestones)], running.Sub(accepted))
		}
	}
	var rows []SummaryRow
	for i := 1; i <= len(milestones); i++ {
		name := "total: apply to Running"
		if i < len(milestones) {
			name = fmt.Sprintf("%s → %s (%s)", milestones[i-1].what, milestones[i].what, milestones[i].segment)
		}
		rows = append(rows, summaryRow(name, samples[i]))
	}
	return rows
}

func summaryRow(name string, d []time.Duration) SummaryRow {
	r := SummaryRow{Segment: name, Count: len(d)}
	if len(d) == 0 {
		return r
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	r.P50 = percentile(d, 50)
	r.P99 = percentile(d, 99)
	return r
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}
