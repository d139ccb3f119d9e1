package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// throughputChart draws the per-second throughput of every profile and
// round of workload w (one line each, one colour per profile) into
// img/throughput-<w>.svg; "" when no round has a series.
func throughputChart(rounds []round, profiles []string, w, img string) (string, error) {
	p := plot.New()
	p.Title.Text = "Pods scheduled per second, " + w
	p.X.Label.Text = "seconds into the measured phase"
	p.Y.Label.Text = "pods/s"
	p.Legend.Top = true
	lines := 0
	for i, prof := range profiles {
		first := true
		for _, r := range rounds {
			s := r[prof][w]
			if s == nil || len(s.series) == 0 {
				continue
			}
			xys := make(plotter.XYs, len(s.series))
			for j, pt := range s.series {
				xys[j].X, xys[j].Y = pt[0], pt[1]
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return "", err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(0.8)
			p.Add(l)
			if first {
				p.Legend.Add(prof, l)
				first = false
			}
			lines++
		}
	}
	if lines == 0 {
		return "", nil
	}
	name := "throughput-" + w + ".svg"
	return name, p.Save(9*vg.Inch, 4*vg.Inch, filepath.Join(img, name))
}

// pluginChart draws, for profile prof on workload w, each plugin's mean time
// per call at PreFilter, Filter and Score (median over rounds), Berth's
// plugins beside upstream's, into img/plugins-<w>.svg.
func pluginChart(rounds []round, prof, w, img string) (string, error) {
	points := []string{"PreFilter", "Filter", "Score"}
	var names []string
	mean := map[string]map[string]float64{}
	for _, pl := range append(append([]string{}, berthPlugins...), upstreamPlugins...) {
		row := map[string]float64{}
		for _, ep := range points {
			vs := values(rounds, prof, w, func(s *sample) (float64, bool) {
				v, ok := s.plugins[pl+"/"+ep]["Average"]
				return v * 1000, ok // ms → µs
			})
			if len(vs) > 0 {
				row[ep] = median(vs)
			}
		}
		if len(row) > 0 {
			names = append(names, pl)
			mean[pl] = row
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Mean time per call, %s profile, %s", prof, w)
	p.Y.Label.Text = "µs per call (Filter and Score: per node)"
	p.Legend.Top = true
	width := vg.Points(9)
	for i, ep := range points {
		vals := make(plotter.Values, len(names))
		for j, n := range names {
			vals[j] = mean[n][ep]
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return "", err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Color = color.Transparent
		bars.Offset = vg.Length(i-1) * width
		p.Add(bars)
		p.Legend.Add(ep, bars)
	}
	labels := make([]string, len(names))
	for i, n := range names {
		labels[i] = n
		if !isBerth(n) {
			labels[i] = n + " (upstream)"
		}
	}
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -0.9
	p.X.Tick.Label.YAlign = -0.4
	name := "plugins-" + w + ".svg"
	return name, p.Save(10*vg.Inch, 5*vg.Inch, filepath.Join(img, name))
}

func isBerth(plugin string) bool {
	for _, b := range berthPlugins {
		if strings.EqualFold(b, plugin) {
			return true
		}
	}
	return false
}
