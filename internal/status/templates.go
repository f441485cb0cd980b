package status

import "html/template"

// style is shared by both pages: system fonts, no external asset.
const style = `
:root{--ok:#1a7f37;--bad:#cf222e;--warn:#bc4c00;--mute:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--pad:24px}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2328;background:#fff;overflow-wrap:break-word}
header{background:#24292f;color:#fff;padding:10px var(--pad);display:flex;flex-wrap:wrap;align-items:baseline;gap:6px 20px}
header h1{font-size:20px;margin:0}
header a{color:#9ecbff}
header .desc{color:#d0d7de;min-width:0}
nav{padding:6px var(--pad);background:var(--bg);border-bottom:1px solid var(--line);display:flex;flex-wrap:wrap;gap:2px 16px}
nav a{min-width:0}
main{padding:12px var(--pad) 40px;max-width:1800px}
h2{font-size:17px;margin:22px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:0;min-width:0}
header,nav,h2,h3,dd,.tile,.badge,.err{overflow-wrap:anywhere}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
.mute{color:var(--mute)}
.small{font-size:12px}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.tiles{display:flex;flex-wrap:wrap;gap:8px}
.tile{display:block;border:1px solid var(--line);border-left:6px solid var(--mute);border-radius:6px;padding:6px 10px;min-width:min(200px,100%);max-width:100%;color:inherit}
.tile b,.tile span{display:block}
.st-ok{border-left-color:var(--ok)}.st-breach{border-left-color:var(--warn)}.st-failing{border-left-color:var(--bad)}
.badge{display:inline-block;max-width:100%;border-radius:10px;padding:1px 8px;font-size:12px;font-weight:600;color:#fff;background:var(--mute)}
.b-disabled{background:#8c959f}.b-ok{background:var(--ok)}.b-breach{background:var(--warn)}.b-failing{background:var(--bad)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(590px,100%),1fr));gap:12px}
.card{border:1px solid var(--line);border-radius:6px;padding:10px 12px;min-width:0;container-type:inline-size}
.card .head{display:flex;justify-content:space-between;align-items:baseline;gap:4px 8px;flex-wrap:wrap}
.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:1px 12px;margin:6px 0}
.facts dt{color:var(--mute)}.facts dd{margin:0}
table{border-collapse:collapse}
.scroll{max-width:100%;overflow-x:auto}
td,th{padding:3px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:middle}
th,.mhead>*{font-weight:600;color:var(--mute);font-size:12px}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.metrics{display:grid;grid-template-columns:repeat(5,auto) minmax(60px,1fr);margin-top:4px}
.mrow{display:contents}
.mrow>*{padding:3px 6px;border-bottom:1px solid var(--line);display:flex;align-items:center;min-width:0}
.mrow>.num{justify-content:flex-end;text-align:right;font-variant-numeric:tabular-nums}
.mrow .num .mute{margin-right:.3em}
.spark-cell{contain:inline-size}.spark-cell svg{display:block}
@container (max-width:559px){
.metrics{grid-template-columns:repeat(5,auto)}
.mrow>*{border-bottom:0}
.mhead>*{border-bottom:1px solid var(--line)}
.mhead>.spark-cell{display:none}
.mrow>.spark-cell{grid-column:1/-1;border-bottom:1px solid var(--line);padding-top:0}
}
.v-ok{color:var(--ok);font-weight:600}.v-breach{color:var(--warn);font-weight:600}
.err{color:var(--bad)}
.logs{background:var(--bg);border:1px solid var(--line);border-radius:4px;padding:4px 8px;margin:4px 0 0;white-space:pre-wrap;word-break:break-all}
.split{margin:8px 0 2px}
.split-rows{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:4px 8px;margin:2px 0}
.split-row{display:contents}
.split .bar{display:flex;height:14px;background:var(--bg);border-radius:2px;overflow:hidden}
.split .bar span{display:block;height:100%}
.sp-out{background:#bc4c00}.sp-queue{background:#8250df}.sp-prefill{background:#0969da}
.key{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 3px 0 8px;vertical-align:-1px}
.conv{margin:8px 0 2px}
.conv-classes{display:flex;flex-wrap:wrap;gap:4px 14px;margin:4px 0}
.cc{border-left:4px solid var(--mute);padding-left:5px}
.cc-hit{border-left-color:var(--ok)}.cc-partial{border-left-color:#d4a72c}.cc-miss{border-left-color:var(--bad)}
.conv-chart{max-width:640px}
.mix{margin:10px 0;max-width:900px}
.mix-bar{display:flex;height:14px;background:var(--bg);border-radius:2px;overflow:hidden;margin:4px 0}
.mix-bar span{display:block;height:100%}
.mc-1k{background:#54aeff}.mc-4k{background:#0969da}.mc-16k{background:#8250df}.mc-32k{background:#bf3989}.mc-96k{background:#bc4c00}
.classes{margin:8px 0 2px}
svg.plot{width:100%;height:auto;display:block;overflow:visible}
svg.plot text{font-family:inherit}
.tick{font-size:11px;fill:var(--mute)}
.axis-label{font-size:12px;fill:#323f4b;font-weight:600}
.axes line{stroke:#9aa5b1;stroke-width:1}
.gridlines line{stroke:#e4e7eb;stroke-width:1}
.gridlines line.v{stroke:#eef1f4}
.line{fill:none;stroke-width:2.2;stroke-linejoin:round;stroke-linecap:round}
.line.dashed{stroke-dasharray:7 4;stroke-width:1.8}
.mk{stroke-width:1.6}
.ref{stroke-width:1.6;stroke-dasharray:7 5;fill:none}
.ref-label{font-size:11.5px;font-weight:700;paint-order:stroke;stroke:#fff;stroke-width:3.5px;stroke-linejoin:round}
.empty{font-size:13px;fill:var(--mute)}
ul.legend{list-style:none;margin:2px 0;padding:0;display:flex;flex-wrap:wrap;gap:2px 14px;font-size:12px}
ul.legend li{display:flex;align-items:center;gap:6px;overflow-wrap:anywhere;min-width:0}
ul.legend svg{flex:none}
.lv-WARN{color:var(--warn)}.lv-ERROR{color:var(--bad)}.lv-DEBUG{color:var(--mute)}
@media (max-width:600px){
:root{--pad:10px}
.card{padding:8px}
.tile{flex:1 1 100%}
.stack,.stack tbody,.stack tr,.stack td{display:block}
.stack tr:first-child{display:none}
.stack tr{border-bottom:1px solid var(--line);padding:4px 0}
.stack td{border:0;padding:2px 0}
.stack td[data-label]::before{content:attr(data-label);display:block;font-size:12px;font-weight:600;color:var(--mute)}
}
`

var funcs = template.FuncMap{"css": func() template.CSS { return template.CSS(style) }}

var pageTmpl = template.Must(template.New("page").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>slaprobe status</title>
<style>{{css}}</style></head>
<body>
<header><h1>slaprobe</h1><span class="desc">{{.Description}}</span></header>
<nav>
<a href="/metrics">Metrics</a>
<a href="/config">Configuration</a>
<a href="/-/healthy">Health</a>
<a href="/-/ready">Readiness</a>
{{range .Targets}}<a href="{{.ProbesURL}}">Probes of {{.Name}}</a>{{end}}
{{range .Links}}<a href="{{.Address}}" title="{{.Description}}">{{.Text}}</a>{{end}}
</nav>
<main>
<p class="mute small">{{.Version}} · up {{.Uptime}} · {{if .Ready}}probing{{else}}<span class="err">not ready: probes are not scheduled</span>{{end}} · page generated {{.Now}}{{if .Refresh}}, reloads every {{.Refresh}} s{{end}} · p50 and tails over the last {{.Window}}</p>

<h2>At a glance</h2>
{{if .Summary}}<div class="tiles">
{{range .Summary}}<a class="tile st-{{.Status}}" href="#{{.Anchor}}" data-status="{{.Status}}"><b>{{.Target}} · {{.Scenario}}</b><span class="small">{{.StatusText}}</span>{{with .Headline}}<span class="small mute">{{.}}</span>{{end}}</a>
{{end}}</div>{{else}}<p>No target is configured.</p>{{end}}

{{range $t := .Targets}}
<h2 id="{{.Anchor}}">Target {{.Name}}</h2>
<dl class="facts">
<dt>URL</dt><dd><code>{{.URL}}</code></dd>
<dt>Model</dt><dd>{{.Model}}</dd>
<dt>Engine</dt><dd>{{with .Engine}}{{if .Up}}{{if .Running}}<b>{{.Running}}</b> running, <b>{{.Waiting}}</b> waiting{{else}}queue not reported{{end}}{{if .KV}}, KV cache {{.KV}}{{end}}{{if .Flavor}} <span class="mute">({{.Flavor}}, scraped {{.ScrapedAgo}})</span>{{end}}{{else if .Tried}}<span class="err">/metrics unreadable: {{.Err}}</span>{{else}}<span class="mute">not scraped yet</span>{{end}} <span class="mute small">from <code>{{.URL}}</code></span>{{else}}<span class="mute">engine metrics off (engine.enabled: false)</span>{{end}}</dd>
<dt>Probes</dt><dd><a href="{{.ProbesURL}}">recent probes of {{.Name}} with their log lines</a>{{if .Held}} · <b>held while a sweep loads the target</b>{{end}}</dd>
</dl>
{{with .Mix}}<div class="mix" data-live-requests="{{.Requests}}" data-stale="{{.Stale}}">
<div class="small"><b>Live length mix</b> <span class="mute">{{if .Err}}none{{else}}prompts of the {{.Requests}} requests the engine finished in the last {{.Window}}{{end}}{{if .ReadAgo}}, /metrics read {{.ReadAgo}}{{end}}</span></div>
{{if .Err}}<p class="small mute">{{.Err}}</p>{{else}}<div class="mix-bar">{{range .Classes}}<span class="mc-{{.Class}}" style="width:{{printf "%.2f" .Width}}%" title="{{.Class}} {{.Share}}"></span>{{end}}</div>
<div class="conv-classes small">{{range .Classes}}<span data-mix-class="{{.Class}}" data-share="{{.Share}}"><span class="key mc-{{.Class}}"></span><b>{{.Class}}</b> {{.Share}}</span>{{end}}{{with .Output}}<span class="mute">{{.}}</span>{{end}}</div>{{end}}
<div class="scroll"><table class="small stack"><tr><th>scenario probed</th><th>shape</th><th>class</th><th class="num">live share of its class</th></tr>
{{range .Shapes}}<tr data-shape="{{.Scenario}}" data-stale="{{.Stale}}"><td><b>{{.Scenario}}</b></td><td data-label="shape">{{.Shape}}</td><td data-label="class">{{or .Class "–"}}</td><td data-label="live share of its class">{{if .Stale}}<span class="err">{{.Share}}</span>{{else}}{{or .Share "–"}}{{end}}</td></tr>
{{end}}</table></div>
{{range .Shapes}}{{if .Stale}}<p class="err small" data-stale-scenario="{{.Scenario}}">{{.Warning}}.</p>{{end}}{{end}}
{{with .Note}}<p class="small mute">{{.}}</p>{{end}}</div>{{end}}
<div class="cards">
{{range .Scenarios}}
<section class="card" id="{{.Anchor}}" data-scenario="{{.Name}}" data-status="{{.Status}}">
<div class="head"><h3>{{.Name}} <span class="mute small" data-api="{{.API}}">{{.API}} · {{.InputTokens}} in / {{.OutputTokens}} out · every {{.Interval}} · timeout {{.Timeout}}</span></h3>
<span class="badge b-{{.Status}}">{{.StatusText}}</span></div>
<dl class="facts small">
<dt>Last probe</dt><dd>{{with .Last}}{{.At}} ({{.Ago}}): {{if .OK}}<span class="v-ok">success</span>{{else if .Short}}<span class="v-ok">short answer</span>{{else}}<span class="err">{{.Kind}}{{if .Reason}} · {{.Reason}}{{end}}</span>{{end}} · {{.PromptTokens}} prompt, {{.OutputTokens}} of {{.RequestedTokens}} output tokens{{if .CacheHit}} · <span class="err">prefix-cache hit: TTFT not recorded</span>{{end}}{{if .Err}}<br><code class="err">{{.Err}}</code>{{end}}{{else}}<span class="mute">none yet</span>{{end}}</dd>
{{if .InFlight}}<dt>In flight</dt><dd>{{.InFlight}}</dd>{{end}}
<dt>Next probe</dt><dd>{{.Next}}</dd>
<dt>Success</dt><dd>{{if .SuccessRate}}{{.SuccessRate}} in the window{{else}}<span class="mute">no probe in the window</span>{{end}} · <a href="{{.ProbesURL}}">probes and logs</a></dd>
{{with .LiveWarning}}<dt>Live mix</dt><dd class="err" data-live-stale>{{.}}</dd>{{end}}
</dl>
<div class="metrics" role="table" aria-label="{{.Name}}: latest, p50 and tail of each metric, its SLA, its recent probes">
<div class="mrow mhead" role="row"><span role="columnheader">metric</span><span role="columnheader" class="num">last</span><span role="columnheader" class="num">p50</span><span role="columnheader" class="num">tail</span><span role="columnheader" class="num">SLA</span><span role="columnheader" class="spark-cell">recent probes</span></div>
{{range .Rows}}<div class="mrow" role="row" data-metric="{{.Name}}">
<span role="cell">{{.Name}}</span>
<span role="cell" class="num">{{or .Last "–"}}</span>
<span role="cell" class="num">{{or .P50 "–"}}</span>
<span role="cell" class="num">{{if .Tail}}<span class="mute">{{.TailLabel}}</span> {{.Tail}}{{else}}–{{end}}</span>
<span role="cell" class="num">{{if .Limit}}<span class="v-{{.Verdict}}">{{.LimitOp}} {{.Limit}}</span>{{else}}<span class="mute">none</span>{{end}}</span>
<span role="cell" class="spark-cell">{{.Spark}}</span>
</div>{{end}}
</div>
{{with .Split}}<div class="split" data-split="{{if .None}}none{{else}}yes{{end}}">
<div class="small"><b>Where TTFT goes</b><span class="key sp-out"></span>outside the engine<span class="key sp-queue"></span>queue<span class="key sp-prefill"></span>prefill</div>
{{if .None}}<p class="small mute">The engine reports no per-request timing: turn on vLLM's <code>--enable-per-request-metrics</code>, or its <code>--otlp-traces-endpoint</code> with slaprobe's OTLP receiver.</p>
{{else}}<div class="split-rows">{{range .Rows}}<div class="split-row" data-quantile="{{.Label}}"><span class="small num">{{.Label}} {{.TTFT}}</span>
<div><div class="bar" title="outside {{.Outside}} · queue {{.Queue}} · prefill {{.Prefill}}"><span class="sp-out" style="width:{{printf "%.2f" .OutsideW}}%"></span><span class="sp-queue" style="width:{{printf "%.2f" .QueueW}}%"></span><span class="sp-prefill" style="width:{{printf "%.2f" .PrefillW}}%"></span></div>
<span class="small">outside {{.Outside}} ({{.OutsideShare}}) · queue {{.Queue}} · prefill {{.Prefill}}</span></div></div>{{end}}</div>{{end}}
<p class="small mute">{{.Sources}}. Each bar averages the probes around that TTFT quantile.</p></div>{{end}}
{{with .Conversation}}<div class="conv" data-conversation="{{.Conversations}}">
<div class="small"><b>Conversations: follow-ups by cache, TTFT by turn</b> <span class="mute">({{.Turns}} turns each)</span></div>
<div class="conv-classes small">{{range .Classes}}<span class="cc cc-{{.Class}}" data-cache="{{.Class}}" data-count="{{.Count}}"><b>{{.Class}}</b> {{.Count}}{{with .Share}} <span class="mute">({{.}})</span>{{end}}</span>{{end}}</div>
<div class="conv-chart">{{.Chart}}</div>{{.Legend}}
<p class="small mute">{{.Note}}</p></div>{{end}}
{{with .Classes}}<div class="classes" data-classes="{{.Total}}">
<div class="small"><b>TTFT by length class</b> <span class="mute">({{.Total}} probes in the window, drawn from {{if .Live}}the live mix{{else}}the trace{{end}}; good: answered within the class's TTFT)</span></div>
<div class="scroll"><table class="small"><tr><th>class</th><th class="num">probes</th><th class="num">good</th><th class="num">slow</th><th class="num">error</th><th class="num">good share</th><th class="num">TTFT p50</th><th class="num">p99</th><th class="num">SLA</th></tr>
{{range .Rows}}<tr data-class="{{.Class}}" data-probes="{{.Probes}}" data-good="{{.Good}}" data-slow="{{.Slow}}" data-error="{{.Error}}"><td>{{.Class}}</td><td class="num">{{.Probes}}</td><td class="num">{{.Good}}</td><td class="num">{{.Slow}}</td><td class="num">{{.Error}}</td><td class="num">{{or .GoodShare "–"}}</td><td class="num">{{or .P50 "–"}}</td><td class="num">{{or .P99 "–"}}</td><td class="num">{{.Limit}}</td></tr>
{{end}}</table></div></div>{{end}}
</section>
{{end}}
</div>
{{end}}

<h2>GPUs (NVML)</h2>
{{if .GPU.Up}}
<p class="small mute">read {{or .GPU.ReadAgo "not yet"}}</p>
<div class="scroll"><table><tr><th>GPU</th><th>name</th><th>power</th><th>utilization</th><th>memory</th><th>temperature</th></tr>
{{range .GPU.Devices}}<tr><td>{{.Index}}</td><td>{{.Name}} <span class="mute small">{{.UUID}}</span></td><td class="num">{{or .Power "–"}}</td><td class="num">{{or .Util "–"}}</td><td class="num">{{or .Memory "–"}}</td><td class="num">{{or .Temp "–"}}</td></tr>
{{end}}</table></div>
{{else if .GPU.Off}}<p class="mute">NVML is off (<code>power.nvml: false</code>): no GPU power, energy or cost metrics.</p>
{{else}}<p class="mute">NVML is not available here (no NVIDIA driver, or no GPU matched <code>power.devices</code>): <code>slaprobe_nvml_up</code> is 0 and power metrics are absent. Run slaprobe on the GPU host to read them.</p>{{end}}

<h2>Sweeps</h2>
{{with .Sweep}}
<p>{{if .Enabled}}The daemon's sweep job is <b>on</b>{{else}}The daemon's sweep job is <b>off</b> (<code>sweep.enabled: false</code>){{end}}{{if .Running}}; <b>sweeping {{.Current}}</b>{{if .Step}} ({{.Step}}){{end}}{{end}}.
{{if .Enabled}}<span class="mute">Start one with <code>curl -X POST http://HOST/-/sweep</code> (add <code>?target=NAME</code> for one target).</span>{{end}}</p>
{{range .Paused}}<p class="err">paused: {{.}}</p>{{end}}
{{if .Targets}}<div class="scroll"><table class="stack"><tr><th>target</th><th>latest sweep</th><th>headline</th><th>what got worse</th><th>last attempt</th></tr>
{{range .Targets}}<tr><td><b>{{.Target}}</b></td>
<td data-label="latest sweep">{{if .HasReport}}<a href="{{.HTML}}">report.html</a> · <a href="{{.JSON}}">report.json</a><br><span class="small mute">{{.Model}}, finished {{.Finished}}{{if .Interrupted}}, interrupted{{end}}</span>{{else}}<span class="mute">none kept</span>{{end}}</td>
<td class="small" data-label="headline">{{range .Headline}}{{.}}<br>{{end}}</td>
<td class="small" data-label="what got worse" data-worse="{{.WorseCount}}">{{if .Compared}}{{if .Worse}}<span class="err">{{.WorseCount}} significant regression(s) {{.Compared}}:</span><br>{{range .Worse}}{{.}}<br>{{end}}{{else}}<span class="mute">nothing significantly worse {{.Compared}}</span>{{end}}{{else}}<span class="mute">no earlier sweep to compare with</span>{{end}}</td>
<td class="small" data-label="last attempt">{{.Attempt}}{{if .AttemptUnsuccessful}}<br><span class="err">{{if .AttemptErr}}{{.AttemptErr}}{{else}}incomplete{{end}}</span>{{end}}</td></tr>
{{end}}</table></div>{{else}}<p class="mute">No sweep has run yet.</p>{{end}}
{{else}}<p class="mute">This daemon has no sweep job.</p>{{end}}
</main></body></html>
`))

var probesTmpl = template.Must(template.New("probes").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>slaprobe probes of {{.Target}}</title>
<style>{{css}}</style></head>
<body>
<header><h1>slaprobe</h1><span class="desc">recent probes of {{if .Target}}{{.Target}}{{else}}a target{{end}}</span></header>
<nav><a href="/">Status</a> <a href="/metrics">Metrics</a> <a href="/config">Configuration</a></nav>
<main>
{{if .Known}}<p class="err">{{if .Target}}No target named <code>{{.Target}}</code>.{{else}}Name a target: <code>/probes?target=NAME</code>.{{end}}</p>
<p>Targets: {{range .Known}}<a href="/probes?target={{.}}">{{.}}</a> {{end}}</p>
{{else if not .Scenarios}}<p>No target named {{.Target}}.</p>
{{else}}
<p>Scenario: {{range .Scenarios}}{{if .Current}}<b>{{.Name}}</b>{{else}}<a href="{{.URL}}">{{.Name}}</a>{{end}} {{end}}</p>
<p class="small mute">Newest first{{if gt .Total (len .Probes)}}: the {{len .Probes}} newest of the {{.Total}} kept{{end}}. Each probe shows the log lines it caused, at every level (also those <code>--log.level</code> hides).</p>
{{if .Probes}}<div class="scroll"><table>
<tr><th>sent</th><th>scenario</th><th>result</th><th>TTFT</th><th>ITL</th><th>decode</th><th>E2E</th><th>tokens</th></tr>
{{range .Probes}}<tr class="probe" data-ok="{{.OK}}">
<td class="small">{{.Sent}}<br><span class="mute">{{.Ago}}</span></td>
<td>{{.Scenario}}<br><span class="small mute">{{.Model}}</span></td>
<td>{{if .Running}}<span class="mute">in flight</span>{{else if .OK}}<span class="v-ok">success</span>{{else}}<span class="err">{{.Kind}}{{if .Reason}} · {{.Reason}}{{end}}</span>{{end}}{{if .CacheHit}}<br><span class="err small">prefix-cache hit</span>{{end}}</td>
<td class="num">{{.TTFT}}</td><td class="num">{{.ITL}}</td><td class="num">{{.Decode}}</td><td class="num">{{.E2E}}</td>
<td class="small">{{.Tokens}}{{if .FinishReason}}<br>finish: {{.FinishReason}}{{end}}{{if .ResponseID}}<br><span class="mute">id {{.ResponseID}}</span>{{end}}{{if .TraceID}}<br><span class="mute">trace <code data-trace-id="{{.TraceID}}">{{.TraceID}}</code></span>{{end}}{{if .Stamps}}<br><span class="mute" data-stamps="{{.Stamps}}">stamps: {{.Stamps}}</span>{{end}}</td></tr>
<tr><td></td><td colspan="7">{{if .Split}}<span class="small" data-split>TTFT: {{.Split}}</span><br>{{end}}{{if .Err}}<code class="err">{{.Err}}</code>{{end}}
{{if .Logs}}<pre class="logs">{{range .Logs}}<span class="lv-{{.Level}}">{{.Time}} {{.Level}} {{.Text}}</span>
{{end}}</pre>{{else}}<span class="small mute">no log line</span>{{end}}</td></tr>
{{end}}</table></div>{{else}}<p class="mute">No probe yet.</p>{{end}}
<h2>Log lines of {{.Target}} outside any probe</h2>
<p class="small mute">Model listing, calibration, sweeps: what concerned the target between probes.</p>
{{if .TargetLogs}}<pre class="logs">{{range .TargetLogs}}<span class="lv-{{.Level}}">{{.Time}} {{.Level}} {{.Text}}</span>
{{end}}</pre>{{else}}<p class="mute">None.</p>{{end}}
{{end}}
</main></body></html>
`))
