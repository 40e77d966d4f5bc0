package storm

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WriteChart draws requests/s at payment over time for both arms, the
// outage shaded and payment's capacity dashed, at path: SVG (the
// checked-in chart), or PNG or PDF by the path's extension.
func WriteChart(path string, r *Result) error {
	if err := CheckChartPath(path); err != nil {
		return err
	}
	p := plot.New()
	// Short texts and a legend in the plot's empty lower right: an SVG viewer may substitute a
	// wider font than the one the layout was measured with, and long lines would run off the edge.
	p.Title.Text = fmt.Sprintf("%s: requests/s at payment, naive vs retrycap (chain cap %d)", r.Scenario.Name, r.Scenario.ChainCap)
	p.X.Label.Text = "seconds since the load began (" + r.Scenario.Chain() + ")"
	p.Y.Label.Text = "requests/s at payment"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = vg.Points(50)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())

	outage := &span{from: r.Timeline.OutageStart.Seconds(), to: r.Timeline.Restore.Seconds(),
		fill: color.RGBA{R: 0xf4, G: 0xc7, B: 0xc3, A: 0xff}}
	p.Add(outage)
	down := "down"
	switch r.Options.Outage {
	case OutageHang:
		down = "hung"
	case OutageKill:
		down = "killed"
	}
	p.Legend.Add(fmt.Sprintf("payment %s (%.0f s)", down, r.Timeline.Restore.Seconds()-r.Timeline.OutageStart.Seconds()), outage)

	capLine, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(r.Options.Capacity)}, {X: r.Options.Duration.Seconds(), Y: float64(r.Options.Capacity)}})
	if err != nil {
		return fmt.Errorf("storm: chart: %w", err)
	}
	capLine.Color = color.Gray{Y: 0x60}
	capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(capLine)
	p.Legend.Add(fmt.Sprintf("payment capacity (%d req/s)", r.Options.Capacity), capLine)

	for _, a := range []struct {
		arm ArmResult
		c   color.Color
	}{
		{r.Naive, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
		{r.Retrycap, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
	} {
		pts := make(plotter.XYs, len(a.arm.PaymentRate))
		for i, v := range a.arm.PaymentRate {
			pts[i] = plotter.XY{X: float64(i) + 0.5, Y: v}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("storm: chart: %w", err)
		}
		l.Color = a.c
		l.Width = vg.Points(2)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (recovery: %s)", a.arm.Arm, FormatRecovery(a.arm.Recovery)), l)
		// The time figures on a line of their own under the arm's (an empty thumbnail): the
		// user's wait during the outage and the work done for users who had stopped waiting.
		p.Legend.Add(timeLegend(a.arm), plot.Thumbnailer(blank{}))
	}
	p.X.Min = 0
	p.X.Max = r.Options.Duration.Seconds()
	p.Y.Min = 0
	if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("storm: chart %s: %w", path, err)
	}
	return nil
}

// timeLegend is an arm's time figures for the chart's legend: "naive: user's wait in the
// outage p50 10.00 s, p99 10.01 s, 412 of 750 gave up; orphaned attempts 1093" (who gave up
// only when someone did).
func timeLegend(a ArmResult) string {
	s := fmt.Sprintf("%s: user's wait in the outage p50 %s, p99 %s", a.Arm, FormatWait(a.Wait.P50), FormatWait(a.Wait.P99))
	if a.Wait.N == 0 {
		s = fmt.Sprintf("%s: user's wait in the outage %s", a.Arm, notMeasuredWait)
	}
	if a.Wait.GaveUp > 0 {
		s += fmt.Sprintf(", %d of %d gave up", a.Wait.GaveUp, a.Wait.N)
	}
	switch {
	case a.Orphans != nil && a.Orphans.Checked == 0:
		s += "; orphaned attempts " + notMeasuredOrphans
	case a.Orphans != nil:
		s += fmt.Sprintf("; orphaned attempts %d", a.Orphans.Attempts)
	}
	return s
}

// blank is a legend entry's empty thumbnail.
type blank struct{}

// Thumbnail implements plot.Thumbnailer: nothing.
func (blank) Thumbnail(*draw.Canvas) {}

// span shades the x range [from, to] over the whole height.
type span struct {
	from, to float64
	fill     color.Color
}

// Plot implements plot.Plotter.
func (s *span) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x0, x1 := trX(s.from), trX(s.to)
	pts := []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}
	c.FillPolygon(s.fill, c.ClipPolygonXY(pts))
}

// Thumbnail implements plot.Thumbnailer for the legend.
func (s *span) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(s.fill, pts)
}

// CheckChartPath checks what can be checked of a chart's path before a run (storm.Run and the
// demo call it first): its format, and that its directory is one (empty: no chart).
func CheckChartPath(path string) error {
	if path == "" {
		return nil
	}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png", ".pdf":
	default:
		return fmt.Errorf("storm: chart path %q: want a .svg, .png or .pdf file", path)
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("storm: chart path %q: its directory: %w", path, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("storm: chart path %q: %s is not a directory", path, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("storm: chart path %q: a directory, want a file", path)
	}
	return nil
}
