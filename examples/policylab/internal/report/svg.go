package report

import (
	"bytes"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SkewSVGName is the file name of the traffic-share chart.
const SkewSVGName = "skew.svg"

// WindowSVGName is the file name of a window's timeline.
func WindowSVGName(mode string, w *Window) string {
	return fmt.Sprintf("window-%s-%s-%d.svg", mode, strings.ReplaceAll(w.Name, " ", "-"), w.Try)
}

// SVGs returns the report's charts by file name: a timeline per window try
// and mode, and the traffic shares of scenario 6.
func (r *Report) SVGs() map[string][]byte {
	out := map[string][]byte{}
	for _, m := range r.Modes {
		for _, w := range m.Windows {
			out[WindowSVGName(m.Name, w)] = []byte(windowSVG(m.Name, w))
		}
	}
	if s := skewSVG(r.Modes); s != "" {
		out[SkewSVGName] = []byte(s)
	}
	return out
}

type svg struct{ b strings.Builder }

func (s *svg) f(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

func (s *svg) text(x, y float64, anchor, class, t string) {
	s.f(`<text x="%.1f" y="%.1f" text-anchor="%s" class="%s">%s</text>`+"\n", x, y, anchor, class, html.EscapeString(t))
}

const svgStyle = `<style>
text{font:12px sans-serif;fill:#222} .small{font-size:10px;fill:#555} .title{font-size:14px;font-weight:bold}
.grid{stroke:#ddd} .axis{stroke:#888}
</style>
`

// windowSVG draws one window: the model's window (shaded), the probes of
// the node, the load balancer's view of it, and every connection of the
// load, against time from the change.
func windowSVG(mode string, w *Window) string {
	tl := w.Timeline
	const (
		left, right = 180.0, 30.0
		width       = 960.0
		laneH       = 28.0
	)
	workers := 1
	for _, c := range tl.Conns {
		workers = max(workers, c.Worker+1)
	}
	start := -time.Duration(0)
	for _, c := range tl.Conns {
		start = min(start, c.At)
	}
	for _, p := range tl.Probes {
		start = min(start, p.At)
	}
	end := max(tl.End, tl.Applied+time.Second/2)
	span := float64(end - start)
	if span <= 0 {
		span = 1
	}
	x := func(d time.Duration) float64 { return left + (width-left-right)*float64(d-start)/span }
	connTop := 40.0 + 3*laneH
	connH := max(float64(workers)*6, 48)
	height := connTop + connH + 70
	var s svg
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", width, height, width, height)
	s.b.WriteString(svgStyle)
	s.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.text(10, 20, "start", "title", fmt.Sprintf("%s — %s (try %d): %s", mode, w.Name, w.Try, w.Event))
	// The model's window after the sync, and the allowed one.
	s.f(`<rect x="%.1f" y="30" width="%.1f" height="%.1f" fill="#fde9b8" opacity="0.6"/>`+"\n", x(tl.FirstSync+w.Allowed.Min), max(1, x(tl.FirstSync+w.Allowed.Max)-x(tl.FirstSync+w.Allowed.Min)), connTop+connH-30)
	s.f(`<rect x="%.1f" y="30" width="%.1f" height="%.1f" fill="#f6c453" opacity="0.6"/>`+"\n", x(tl.FirstSync+w.Predicted.Min), max(1, x(tl.Sync+w.Predicted.Max)-x(tl.FirstSync+w.Predicted.Min)), connTop+connH-30)
	// Time axis.
	axisY := connTop + connH + 10
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="axis"/>`+"\n", left, axisY, width-right, axisY)
	step := 250 * time.Millisecond
	for span/float64(step) > 16 {
		step *= 2
	}
	for t := (start / step) * step; t <= end; t += step {
		if t < start {
			continue
		}
		s.f(`<line x1="%.1f" y1="30" x2="%.1f" y2="%.1f" class="grid"/>`+"\n", x(t), x(t), axisY)
		s.text(x(t), axisY+14, "middle", "small", fmt.Sprintf("%d ms", t.Milliseconds()))
	}
	// Events.
	for _, e := range []struct {
		at    time.Duration
		label string
		color string
	}{{0, "change", "#333"}, {tl.FirstSync, "kube-proxy synced (first family)", "#1f6feb"}, {tl.Sync, "kube-proxy synced", "#1f6feb"}, {tl.Decided, "prober decided", "#bf3989"}, {tl.Applied, "rules rebuilt", "#8250df"}} {
		s.f(`<line x1="%.1f" y1="30" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>`+"\n", x(e.at), x(e.at), axisY, e.color)
	}
	legendY := axisY + 34
	lx := left
	for _, e := range []struct{ label, color string }{{"change", "#333"}, {"kube-proxy synced", "#1f6feb"}, {"prober decided", "#bf3989"}, {"rules rebuilt", "#8250df"}, {"model window", "#f6c453"}, {"allowed", "#fde9b8"}} {
		s.f(`<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/>`+"\n", lx, legendY-9, e.color)
		s.text(lx+14, legendY, "start", "small", e.label)
		lx += 14 + 7*float64(len(e.label)) + 16
	}
	// Lane 1: probes.
	y1 := 40.0
	s.text(left-8, y1+14, "end", "", "probes of "+w.Node)
	for _, p := range tl.Probes {
		color, label := "#999", "no answer"
		switch {
		case p.Code >= 200 && p.Code < 400:
			color, label = "#2da44e", fmt.Sprint(p.Code)
		case p.Code != 0:
			color, label = "#cf222e", fmt.Sprint(p.Code)
		}
		s.f(`<circle cx="%.1f" cy="%.1f" r="5" fill="%s"><title>%s at %d ms</title></circle>`+"\n", x(p.At), y1+10, color, label, p.At.Milliseconds())
	}
	// Lane 2: the load balancer's view.
	y2 := y1 + laneH
	s.text(left-8, y2+14, "end", "", "LB: "+w.Node+" member")
	s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="12" fill="#eee"/>`+"\n", left, y2+4, width-left-right)
	for _, sp := range tl.Member {
		from, to := max(sp.From, start), min(sp.To, end)
		if to > from {
			s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="12" fill="#2da44e"/>`+"\n", x(from), y2+4, max(1, x(to)-x(from)))
		}
	}
	// Lane 3 and below: connections, one row per worker.
	s.text(left-8, connTop-6, "end", "", "connections")
	for _, c := range tl.Conns {
		color := map[string]string{"node": "#1f6feb", "other": "#8c959f", "failed": "#cf222e"}[c.Outcome]
		s.f(`<rect x="%.1f" y="%.1f" width="3" height="5" fill="%s"/>`+"\n", x(c.At), connTop+float64(c.Worker)*6, color)
	}
	for i, k := range []struct{ label, color string }{{"served on " + w.Node, "#1f6feb"}, {"served elsewhere", "#8c959f"}, {"failed", "#cf222e"}} {
		ky := connTop + 12 + float64(i)*14
		s.f(`<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s"/>`+"\n", left-112, ky-8, k.color)
		s.text(left-100, ky, "start", "small", k.label)
	}
	s.f("</svg>\n")
	return s.b.String()
}

// skewSVG draws each pod's measured share per mode beside the shares even
// spreading over nodes and the weight header predict.
func skewSVG(modes []*Mode) string {
	var have []*Mode
	for _, m := range modes {
		if m.Skew != nil && len(m.Skew.Pods) > 0 {
			have = append(have, m)
		}
	}
	if len(have) == 0 {
		return ""
	}
	pods := have[0].Skew.Pods
	type bar struct {
		label, color string
		v            func(i int) float64
	}
	bars := []bar{
		{"even per node (expected)", "#f6c453", func(i int) float64 { return pods[i].Even }},
		{"by the weight header", "#8c959f", func(i int) float64 { return pods[i].Weighted }},
	}
	colors := []string{"#1f6feb", "#2da44e", "#8250df"}
	for k, m := range have {
		bars = append(bars, bar{"measured, " + m.Name, colors[k%len(colors)], func(i int) float64 {
			if i < len(m.Skew.Pods) {
				return m.Skew.Pods[i].Share
			}
			return 0
		}})
	}
	const (
		left, top, plotH = 60.0, 40.0, 220.0
		barW, gap        = 22.0, 30.0
	)
	groupW := float64(len(bars))*barW + gap
	width := left + float64(len(pods))*groupW + 20
	height := top + plotH + 44 + 14*float64(len(bars))
	var s svg
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", width, height, width, height)
	s.b.WriteString(svgStyle)
	s.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.text(10, 20, "start", "title", "Scenario 6: traffic share per pod under Local")
	y := func(v float64) float64 { return top + plotH*(1-v/0.6) }
	for v := 0.0; v <= 0.6+1e-9; v += 0.1 {
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`+"\n", left, y(v), width-20, y(v))
		s.text(left-6, y(v)+4, "end", "small", fmt.Sprintf("%.0f %%", 100*v))
	}
	for i, p := range pods {
		gx := left + float64(i)*groupW + gap/2
		for k, b := range bars {
			v := b.v(i)
			s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %.1f %%</title></rect>`+"\n", gx+float64(k)*barW, y(v), barW-2, top+plotH-y(v), b.color, b.label, 100*v)
		}
		s.text(gx+float64(len(bars))*barW/2, top+plotH+16, "middle", "", p.Pod+" ("+p.Node+")")
	}
	for k, b := range bars {
		ly := top + plotH + 40 + 14*float64(k)
		s.f(`<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/>`+"\n", left, ly-9, b.color)
		s.text(left+14, ly, "start", "small", b.label)
	}
	s.f("</svg>\n")
	return s.b.String()
}

// WriteFiles writes the report's Markdown to path and its SVG charts into
// the same directory, linked from the Markdown, and returns the charts'
// file names.
func WriteFiles(r *Report, path string) ([]string, error) {
	dir := filepath.Dir(path)
	svgs := r.SVGs()
	links := make(map[string]string, len(svgs))
	var names []string
	for name, data := range svgs {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return names, err
		}
		links[name] = name
		names = append(names, name)
	}
	slices.Sort(names)
	var md bytes.Buffer
	r.Markdown(&md, links)
	return names, os.WriteFile(path, md.Bytes(), 0o644)
}
