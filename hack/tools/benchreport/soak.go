package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// soakReport is the part of a soak's report.json (hack/soak) the chart
// reads: each replica's /metrics samples, per process start.
type soakReport struct {
	Seed     int64   `json:"seed"`
	Minutes  float64 `json:"minutes"`
	Nodes    int     `json:"nodes"`
	Replicas []struct {
		Name    string `json:"name"`
		Samples []struct {
			At     float64 `json:"atSeconds"`
			RSS    float64 `json:"rssBytes"`
			Leader bool    `json:"leader"`
			Start  int     `json:"start"`
		} `json:"samples"`
	} `json:"replicas"`
}

// soakChart draws each replica's RSS over the soak (one line per process
// start, one colour per replica; the leader's samples are marked) from a
// soak's report.json into the SVG file out.
func soakChart(reportJSON, out string) error {
	data, err := os.ReadFile(reportJSON)
	if err != nil {
		return err
	}
	var r soakReport
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", reportJSON, err)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Scheduler replicas' RSS, soak of %.0f min at %d nodes (seed %d)", r.Minutes, r.Nodes, r.Seed)
	p.X.Label.Text = "minutes into the soak"
	p.Y.Label.Text = "RSS (MiB)"
	p.Legend.Top = true
	sort.Slice(r.Replicas, func(i, j int) bool { return r.Replicas[i].Name < r.Replicas[j].Name })
	lines := 0
	for i, rep := range r.Replicas {
		byStart := map[int]plotter.XYs{}
		var leading plotter.XYs
		for _, s := range rep.Samples {
			pt := plotter.XY{X: s.At / 60, Y: s.RSS / (1 << 20)}
			byStart[s.Start] = append(byStart[s.Start], pt)
			if s.Leader {
				leading = append(leading, pt)
			}
		}
		starts := make([]int, 0, len(byStart))
		for st := range byStart {
			starts = append(starts, st)
		}
		sort.Ints(starts)
		for k, st := range starts {
			l, err := plotter.NewLine(byStart[st])
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1)
			p.Add(l)
			if k == 0 {
				p.Legend.Add(rep.Name+" (each restart a new line)", l)
			}
			lines++
		}
		if len(leading) > 0 {
			sc, err := plotter.NewScatter(leading)
			if err != nil {
				return err
			}
			sc.Color = plotutil.Color(i)
			sc.Radius = vg.Points(1.2)
			p.Add(sc)
			p.Legend.Add(rep.Name+" leading", sc)
		}
	}
	if lines == 0 {
		return fmt.Errorf("%s: no samples", reportJSON)
	}
	return p.Save(9*vg.Inch, 4*vg.Inch, out)
}
