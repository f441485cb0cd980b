package browser

import (
	"html"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// overflowScript measures the page after layout and writes what it found
// into the DOM, one line each, for --dump-dom to return: first the number
// of boxes checked, then every overflow. A box's content is every element
// and every run of text inside it; what lies inside a scroll container
// (overflow-x auto or scroll) is the container's to hold, so only the
// container itself is checked. Empty boxes (display:none, <title>) are
// left out; of what spills, the outermost element is reported, four at
// most per box.
const overflowScript = `<script>(function(){
var out=[], tol=1, de=document.documentElement;
if (de.scrollWidth > window.innerWidth) out.push('the document is '+de.scrollWidth+' px wide in a '+window.innerWidth+' px window: the page scrolls sideways');
function name(e){
  var s=e.nodeType===3?'text':e.tagName.toLowerCase(), el=e.nodeType===3?e.parentElement:e;
  if(e.nodeType===1){ if(e.id) s+='#'+e.id; var c=e.getAttribute('class'); if(c) s+='.'+c.trim().split(/\s+/).join('.'); }
  var d=el.closest('[data-metric],[data-quantile]'); if(d) s+=' in ['+(d.getAttribute('data-metric')||d.getAttribute('data-quantile'))+']';
  var t=(e.textContent||'').replace(/\s+/g,' ').trim(); if(t.length>40) t=t.slice(0,40)+'…'; if(t) s+=' "'+t+'"';
  return s;
}
function outside(r,b){ return r.left<b.left-tol||r.right>b.right+tol||r.top<b.top-tol||r.bottom>b.bottom+tol; }
function px(r){ return '['+Math.round(r.left)+','+Math.round(r.right)+']'; }
var boxes=document.querySelectorAll(SELECTOR);
out.unshift('boxes '+boxes.length);
boxes.forEach(function(box){
  var b=box.getBoundingClientRect(), n=0;
  var cls=(box.getAttribute('class')||'').trim().split(/\s+/)[0];
  var who=box.tagName.toLowerCase()+(cls?'.'+cls:'')+' '+(box.id||box.getAttribute('href')||'');
  function check(node){
    var r;
    if(node.nodeType===3){
      if(!node.textContent.trim()) return;
      var rg=document.createRange(); rg.selectNodeContents(node); r=rg.getBoundingClientRect();
    } else if(node.nodeType===1){ r=node.getBoundingClientRect(); } else return;
    if(r.width===0&&r.height===0) return false;
    if(!outside(r,b)) return false;
    if(n++<4) out.push(who+' '+px(b)+': '+name(node)+' '+px(r)+' lies outside it');
    return true;
  }
  function walk(el){
    for(var c=el.firstChild;c;c=c.nextSibling){
      if(check(c)||c.nodeType!==1) continue; // its own content is reported with it
      var o=getComputedStyle(c).overflowX;
      if(o==='auto'||o==='scroll') continue;
      walk(c);
    }
  }
  walk(box);
});
var pre=document.createElement('pre'); pre.id='slaprobe-overflow'; pre.hidden=true;
pre.textContent='\n'+out.join('\n')+'\n'; document.body.appendChild(pre);
})();</script>`

// Overflow lays out page (the HTML of a page, not its URL) in a window
// width×height pixels, and returns what is drawn where it should not be:
// the document wider than the window (the page scrolls sideways), and any
// element or text of a box (every element that selector matches, e.g.
// ".card") that lies outside the box. Content inside a scroll container
// counts as the container's. boxes is the number of boxes checked: a
// selector that matches nothing checks nothing.
//
// The page runs as a local file with a measuring script added: a served
// page's Content-Security-Policy forbids scripts. Links and assets it
// names are not loaded (the daemon's pages have none but inline styles).
func Overflow(t testing.TB, bin, page, selector string, width, height int) (problems []string, boxes int) {
	t.Helper()
	script := strings.Replace(overflowScript, "SELECTOR", strconv.Quote(selector), 1)
	i := strings.LastIndex(page, "</body>")
	if i < 0 {
		t.Fatal("Overflow: the page has no </body>")
	}
	file := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(file, []byte(page[:i]+script+page[i:]), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, stderr := Run(t, bin, "file://"+file, "--dump-dom", "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height))
	if c := Console(stderr); len(c) > 0 {
		t.Errorf("console output while measuring at %d px:\n%s", width, strings.Join(c, "\n"))
	}
	const open = `<pre id="slaprobe-overflow" hidden="">`
	j := strings.Index(dom, open)
	k := strings.Index(dom[max(j, 0):], "</pre>")
	if j < 0 || k < 0 {
		t.Fatalf("the measuring script left no result at %d px (a script error?)", width)
	}
	lines := strings.Split(strings.TrimSpace(html.UnescapeString(dom[j+len(open):j+k])), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(lines[0], "boxes "))
	if err != nil {
		t.Fatalf("the measuring script's first line is %q", lines[0])
	}
	return lines[1:], n
}
