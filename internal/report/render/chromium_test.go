package render

import (
	"bytes"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/test/browser"
)

// These tests open report.html in headless Chromium, the way a reader on
// an air-gapped cluster would, and check that it renders: every chart is in
// the DOM after load, nothing reached the console (the page runs no script,
// so any console line is a CSP violation or an error), and the screenshot
// has real content.

func chromium(t *testing.T) string { return browser.Chromium(t) }

// runChromium runs headless Chromium on a local file and returns stdout and
// stderr.
func runChromium(t *testing.T, bin, page string, args ...string) (string, string) {
	return browser.Run(t, bin, "file://"+page, args...)
}

func writeSample(t *testing.T, r *report.Report) string {
	t.Helper()
	paths, err := Write(t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	return paths[2]
}

func TestChromiumRender(t *testing.T) {
	bin := chromium(t)
	r := Sample()
	page := writeSample(t, r)

	dom, stderr := runChromium(t, bin, page, "--dump-dom")
	if errs := browser.Console(stderr); len(errs) > 0 {
		t.Errorf("console output while loading report.html:\n%s", strings.Join(errs, "\n"))
	}
	for _, c := range slo.Charts {
		if !strings.Contains(dom, `data-chart="`+c+`"`) {
			t.Errorf("chart %q missing from the rendered DOM", c)
		}
	}
	if n, want := strings.Count(dom, `data-chart="capacity"`), len(r.Capacity.UseCases); n != want {
		t.Errorf("%d capacity charts in the DOM; want %d", n, want)
	}
	if n := strings.Count(dom, `<svg class="plot"`); n < len(slo.Charts)-4 {
		t.Errorf("only %d SVG plots in the DOM", n)
	}

	shot := filepath.Join(t.TempDir(), "shot.png")
	_, stderr = runChromium(t, bin, page, "--screenshot="+shot, "--window-size=1400,6000")
	if errs := browser.Console(stderr); len(errs) > 0 {
		t.Errorf("console output while taking the screenshot:\n%s", strings.Join(errs, "\n"))
	}
	checkScreenshot(t, shot, 1400, 6000)
	if dir := os.Getenv("SLAPROBE_REPORT_SHOT_DIR"); dir != "" {
		b, _ := os.ReadFile(shot)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "report-1400x6000.png"), b, 0o644)
	}
}

// The no-power report shows its placeholders in the browser as well.
func TestChromiumRenderPlaceholders(t *testing.T) {
	bin := chromium(t)
	r := Sample()
	stripPower(r)
	dom, stderr := runChromium(t, bin, writeSample(t, r), "--dump-dom")
	if errs := browser.Console(stderr); len(errs) > 0 {
		t.Errorf("console output:\n%s", strings.Join(errs, "\n"))
	}
	if !strings.Contains(dom, `id="chart-power-vs-context" data-chart="power-vs-context" data-state="not-measured"`) {
		t.Error("power placeholder missing from the rendered DOM")
	}
}

// A page that loads something from the network must trip the console
// check, or the check above proves nothing.
func TestChromiumConsoleCheckWorks(t *testing.T) {
	bin := chromium(t)
	page := filepath.Join(t.TempDir(), "bad.html")
	var buf bytes.Buffer
	RenderHTML(&buf, Sample())
	bad := strings.Replace(buf.String(), "</main>", `<img src="http://127.0.0.1:9/pixel.png" alt=""></main>`, 1)
	os.WriteFile(page, []byte(bad), 0o644)
	_, stderr := runChromium(t, bin, page, "--dump-dom")
	if len(browser.Console(stderr)) == 0 {
		t.Fatal("an external image went unreported: the console check is blind")
	}
}

func checkScreenshot(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("screenshot is %dx%d; want %dx%d", b.Dx(), b.Dy(), w, h)
	}
	colors, inked := inkStats(img)
	// A blank or broken page has a handful of colours and almost no ink;
	// the report has text, coloured lines and tinted bands.
	if colors < 200 {
		t.Errorf("screenshot has only %d distinct colours", colors)
	}
	if inked < 0.05 {
		t.Errorf("only %.1f%% of the screenshot is not white", inked*100)
	}
}

func inkStats(img image.Image) (int, float64) {
	b := img.Bounds()
	seen := map[uint32]bool{}
	var ink, total int
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			total++
			if r < 0xf800 || g < 0xf800 || bl < 0xf800 {
				ink++
			}
		}
	}
	return len(seen), float64(ink) / float64(total)
}

// labelCheckScript measures, in the browser, every reference label and
// line of every plot, and writes what overlaps into <pre id="label-check">.
// It also compares each label's real width with the width the SVG builder
// assumed (labelBox), so the Go-side checks are known to be conservative.
const labelCheckScript = `<script>
(function(){
  var out=[], labels=0, worst=0;
  document.querySelectorAll('svg.plot').forEach(function(svg){
    var id=svg.getAttribute('aria-labelledby');
    var boxes=[];
    svg.querySelectorAll('text.ref-label').forEach(function(t){
      var b=t.getBBox(); labels++;
      boxes.push({t:t.textContent,x0:b.x,y0:b.y,x1:b.x+b.width,y1:b.y+b.height});
      var assumed=t.textContent.length*6.4*1.12;
      worst=Math.max(worst,b.width/assumed);
    });
    for(var i=0;i<boxes.length;i++){
      var a=boxes[i];
      for(var j=i+1;j<boxes.length;j++){
        var c=boxes[j];
        if(a.x0<c.x1-0.5&&c.x0<a.x1-0.5&&a.y0<c.y1-0.5&&c.y0<a.y1-0.5){out.push(id+': "'+a.t+'" overlaps "'+c.t+'"');}
      }
      svg.querySelectorAll('line.ref').forEach(function(l){
        var x1=+l.getAttribute('x1'),x2=+l.getAttribute('x2'),y1=+l.getAttribute('y1'),y2=+l.getAttribute('y2');
        var lx0=Math.min(x1,x2),lx1=Math.max(x1,x2),ly0=Math.min(y1,y2),ly1=Math.max(y1,y2);
        if(lx0<=a.x1&&a.x0<=lx1&&ly0<=a.y1&&a.y0<=ly1){out.push(id+': "'+a.t+'" crosses the line at x='+x1+'..'+x2+' y='+y1+'..'+y2);}
      });
    }
  });
  var pre=document.createElement('pre'); pre.id='label-check';
  pre.textContent='labels='+labels+' worst-width-ratio='+worst.toFixed(3)+'\n'+out.join('\n');
  document.body.appendChild(pre);
})();
</script>`

// The labels of every chart, measured by the browser itself: none overlaps
// another or lies across a threshold or the capacity line.
func TestChromiumLabelsDoNotOverlap(t *testing.T) {
	bin := chromium(t)
	var buf bytes.Buffer
	if err := RenderHTML(&buf, Sample()); err != nil {
		t.Fatal(err)
	}
	// A copy for measuring only: the report itself runs no script, so the
	// CSP goes and the measuring script comes in.
	page := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy"[^>]*>`).ReplaceAllString(buf.String(), "")
	// A control plot with a known overlap and a label across a line: the
	// script must report both, or it proves nothing.
	control := `<svg class="plot" aria-labelledby="control" viewBox="0 0 640 330"><line class="ref" x1="64" x2="576" y1="100" y2="100"/>` +
		`<text class="ref-label" x="300" y="104">TTFT ≤ 10 s</text><text class="ref-label" x="330" y="104">decode ≥ 10 tok/s</text></svg>`
	page = strings.Replace(page, "</main>", control+"</main>", 1)
	page = strings.Replace(page, "</body>", labelCheckScript+"</body>", 1)
	path := filepath.Join(t.TempDir(), "measure.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, _ := runChromium(t, bin, path, "--dump-dom", "--window-size=1280,800")
	m := regexp.MustCompile(`(?s)<pre id="label-check">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the measuring script wrote nothing")
	}
	lines := strings.Split(strings.TrimSpace(html.UnescapeString(m[1])), "\n")
	t.Log(lines[0])
	var labels int
	var ratio float64
	fmt.Sscanf(lines[0], "labels=%d worst-width-ratio=%g", &labels, &ratio)
	if labels < 10 {
		t.Errorf("only %d reference labels measured", labels)
	}
	if ratio > 1 {
		t.Errorf("a label is %.0f%% wider in the browser than the SVG builder assumes: placement can overlap", (ratio-1)*100)
	}
	var overlap, across bool
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, "control: ") && strings.Contains(l, "overlaps"):
			overlap = true
		case strings.HasPrefix(l, "control: ") && strings.Contains(l, "crosses the line"):
			across = true
		default:
			t.Error(l)
		}
	}
	if !overlap || !across {
		t.Errorf("the control plot's problems went unreported (overlap %v, across a line %v): the check is blind", overlap, across)
	}
}
