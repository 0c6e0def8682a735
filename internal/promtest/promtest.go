// Package promtest reads Prometheus series in tests: gathered from a
// registry or scraped from an endpoint's text, as one map from each
// series (its name and sorted labels) to its value.
package promtest

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/prometheus/client_golang/prometheus"
)

// Series maps `name{label="value",...}` (labels sorted by name; just
// name without labels) to a counter's, gauge's or untyped value.
type Series map[string]float64

// Gather reads g's series.
func Gather(g prometheus.Gatherer) (Series, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	return flatten(mfs), nil
}

// Scrape reads the series of the Prometheus text at url.
func Scrape(url string) (Series, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}

// Parse reads the series of Prometheus text.
func Parse(r io.Reader) (Series, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	mfs := make([]*dto.MetricFamily, 0, len(byName))
	for _, mf := range byName {
		mfs = append(mfs, mf)
	}
	return flatten(mfs), nil
}

func flatten(mfs []*dto.MetricFamily) Series {
	s := Series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Untyped != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue // histograms and summaries: not used here
			}
			s[Key(mf.GetName(), labelPairs(m.GetLabel())...)] = v
		}
	}
	return s
}

func labelPairs(ls []*dto.LabelPair) []string {
	kv := make([]string, 0, 2*len(ls))
	for _, l := range ls {
		kv = append(kv, l.GetName(), l.GetValue())
	}
	return kv
}

// Key is the key of the series name with labels given as name, value,
// name, value...
func Key(name string, labels ...string) string {
	if len(labels) == 0 {
		return name
	}
	pairs := make([]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	slices.Sort(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// Delta returns after minus before for every series of after whose name
// starts with prefix (a series absent before counts from zero).
func Delta(before, after Series, prefix string) Series {
	d := Series{}
	for k, v := range after {
		if strings.HasPrefix(k, prefix) {
			d[k] = v - before[k]
		}
	}
	return d
}

// Names returns the series names (without labels) in s, sorted, once
// each.
func (s Series) Names() []string {
	var names []string
	for k := range s {
		name, _, _ := strings.Cut(k, "{")
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
