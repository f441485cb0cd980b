package browser

import (
	"strings"
	"testing"
)

// TestOverflowSeesSpill: each way content can leave its box is reported,
// and what scrolls inside its box is not; or the status page's layout test
// proves nothing.
func TestOverflowSeesSpill(t *testing.T) {
	bin := Chromium(t)
	page := `<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{margin:0}.card{width:300px;border:1px solid}</style></head><body>
<div class="card" id="fits"><p>short words that wrap as they should in a narrow box</p></div>
<div class="card" id="wide-svg"><svg width="450" height="20"></svg></div>
<div class="card" id="long-word"><p>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa</p></div>
<div class="card" id="scrolls"><div style="overflow-x:auto"><table><tr><td style="min-width:900px">wide</td></tr></table></div></div>
</body></html>`
	problems, boxes := Overflow(t, bin, page, ".card", 500, 600)
	if boxes != 4 {
		t.Errorf("%d boxes checked; want 4", boxes)
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{"the page scrolls sideways", "div.card wide-svg ", "div.card long-word "} {
		if !strings.Contains(all, want) {
			t.Errorf("not reported: %s; got:\n%s", want, all)
		}
	}
	for _, not := range []string{"div.card fits ", "div.card scrolls "} {
		if strings.Contains(all, not) {
			t.Errorf("reported, but it fits or scrolls in its box: %s; got:\n%s", not, all)
		}
	}
	// The same page in a window wide enough: only the boxes spill.
	problems, _ = Overflow(t, bin, page, ".card", 1000, 600)
	if all := strings.Join(problems, "\n"); strings.Contains(all, "sideways") || len(problems) != 2 {
		t.Errorf("at 1000 px, want the two spilling boxes only; got:\n%s", all)
	}
}
