package dashgen

// Typed subset of the Grafana dashboard JSON model (schemaVersion 39, Grafana 10.3 to 11), just what
// slaprobe's dashboards use. Field order is JSON order; nil and zero optional fields are left out, so the
// output stays small and stable. Grafana fills every option left out with its default on load.

// SchemaVersion is the dashboard schema the JSON is written for.
const SchemaVersion = 39

// Dashboard is one dashboard file.
type Dashboard struct {
	Annotations          Annotations `json:"annotations"`
	Description          string      `json:"description,omitempty"`
	Editable             bool        `json:"editable"`
	FiscalYearStartMonth int         `json:"fiscalYearStartMonth"`
	GraphTooltip         int         `json:"graphTooltip"` // 1: shared crosshair
	Links                []Link      `json:"links"`
	Panels               []*Panel    `json:"panels"`
	Refresh              string      `json:"refresh"`
	SchemaVersion        int         `json:"schemaVersion"`
	Tags                 []string    `json:"tags"`
	Templating           Templating  `json:"templating"`
	Time                 TimeRange   `json:"time"`
	Timepicker           struct{}    `json:"timepicker"`
	Timezone             string      `json:"timezone"`
	Title                string      `json:"title"`
	UID                  string      `json:"uid"`
	Version              int         `json:"version"`

	file string // file name under dashboards/
}

// Annotations holds the built-in "Annotations & Alerts" entry Grafana expects.
type Annotations struct {
	List []Annotation `json:"list"`
}

// Annotation is one annotation query.
type Annotation struct {
	BuiltIn    int            `json:"builtIn"`
	Datasource *DataSourceRef `json:"datasource"`
	Enable     bool           `json:"enable"`
	Hide       bool           `json:"hide"`
	IconColor  string         `json:"iconColor"`
	Name       string         `json:"name"`
	Type       string         `json:"type,omitempty"`
	// A Prometheus annotation: a region wherever Expr has a sample.
	Expr        string `json:"expr,omitempty"`
	Step        string `json:"step,omitempty"`
	TitleFormat string `json:"titleFormat,omitempty"`
	TextFormat  string `json:"textFormat,omitempty"`
}

// Link is a dashboard link (the slaprobe dashboards link to each other by tag).
type Link struct {
	AsDropdown  bool     `json:"asDropdown"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
	Tags        []string `json:"tags"`
	Title       string   `json:"title"`
	Type        string   `json:"type"`
}

// TimeRange is the default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds the dashboard variables.
type Templating struct {
	List []*Variable `json:"list"`
}

// Variable is a template variable: the data source picker or a label_values query.
type Variable struct {
	Name        string         `json:"name"`
	Label       string         `json:"label"`
	Type        string         `json:"type"` // datasource, query
	Datasource  *DataSourceRef `json:"datasource,omitempty"`
	Query       string         `json:"query"`
	Regex       string         `json:"regex"`
	Refresh     int            `json:"refresh"` // 1: on load; 2: on time range change
	Sort        int            `json:"sort"`    // 1: alphabetical ascending
	IncludeAll  bool           `json:"includeAll"`
	AllValue    string         `json:"allValue,omitempty"`
	Multi       bool           `json:"multi"`
	Hide        int            `json:"hide"`
	Current     *struct{}      `json:"current,omitempty"` // unset: Grafana picks the first option; {} is not a valid option in its schema
	Options     []struct{}     `json:"options"`
	SkipURLSync bool           `json:"skipUrlSync"`
	Description string         `json:"description,omitempty"`
}

// DataSourceRef points at a data source; slaprobe's dashboards always use the ${datasource} variable.
type DataSourceRef struct {
	Type string `json:"type,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// GridPos is a panel's place on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Panel is any panel: row, timeseries, trend, stat, table, bargauge or barchart. Options holds the
// type's own options struct.
type Panel struct {
	Type            string           `json:"type"`
	Title           string           `json:"title"`
	Description     string           `json:"description,omitempty"`
	ID              int              `json:"id"`
	GridPos         GridPos          `json:"gridPos"`
	Datasource      *DataSourceRef   `json:"datasource,omitempty"`
	Interval        string           `json:"interval,omitempty"` // minimum $__interval
	Repeat          string           `json:"repeat,omitempty"`
	RepeatDirection string           `json:"repeatDirection,omitempty"`
	MaxPerRow       int              `json:"maxPerRow,omitempty"`
	Collapsed       *bool            `json:"collapsed,omitempty"` // rows only
	Panels          []*Panel         `json:"panels,omitempty"`    // rows only: none, rows are never collapsed
	Targets         []*Target        `json:"targets,omitempty"`
	FieldConfig     *FieldConfig     `json:"fieldConfig,omitempty"`
	Options         any              `json:"options,omitempty"`
	Transformations []Transformation `json:"transformations,omitempty"`

	// reportChart is the report.html chart (internal/slo.Charts) this panel mirrors, if any.
	reportChart string
}

// Target is one Prometheus query.
type Target struct {
	RefID        string         `json:"refId"`
	Datasource   *DataSourceRef `json:"datasource"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat,omitempty"`
	Format       string         `json:"format,omitempty"` // time_series (default), table
	Instant      bool           `json:"instant"`
	Range        bool           `json:"range"`
	Interval     string         `json:"interval,omitempty"`
	Hide         bool           `json:"hide,omitempty"`
}

// FieldConfig is the standard and per-type field configuration.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []Override    `json:"overrides"`
}

// FieldDefaults apply to every field of the panel.
type FieldDefaults struct {
	Unit        string         `json:"unit,omitempty"`
	Decimals    *int           `json:"decimals,omitempty"`
	Min         *float64       `json:"min,omitempty"`
	Max         *float64       `json:"max,omitempty"`
	NoValue     string         `json:"noValue,omitempty"`
	DisplayName string         `json:"displayName,omitempty"`
	Color       *FieldColor    `json:"color,omitempty"`
	Thresholds  *Thresholds    `json:"thresholds,omitempty"`
	Mappings    []ValueMapping `json:"mappings"`
	Custom      *Custom        `json:"custom,omitempty"`
}

// FieldColor is the colour scheme: palette-classic, thresholds or fixed.
type FieldColor struct {
	Mode       string `json:"mode"`
	FixedColor string `json:"fixedColor,omitempty"`
}

// Thresholds are colour steps; the first step's value is null (-Infinity).
type Thresholds struct {
	Mode  string `json:"mode"` // absolute
	Steps []Step `json:"steps"`
}

// Step is one threshold step.
type Step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// ValueMapping maps values to text and colour (type "value").
type ValueMapping struct {
	Type    string                  `json:"type"`
	Options map[string]MappingValue `json:"options"`
}

// MappingValue is what a mapped value shows.
type MappingValue struct {
	Text  string `json:"text"`
	Color string `json:"color,omitempty"`
	Index int    `json:"index"`
}

// Custom holds the graph-style field options of timeseries and barchart, and the cell options of
// tables. Only the fields a panel sets are written.
type Custom struct {
	DrawStyle         string           `json:"drawStyle,omitempty"` // line, bars, points
	LineWidth         int              `json:"lineWidth,omitempty"`
	FillOpacity       int              `json:"fillOpacity,omitempty"`
	ShowPoints        string           `json:"showPoints,omitempty"`
	PointSize         int              `json:"pointSize,omitempty"`
	SpanNulls         *bool            `json:"spanNulls,omitempty"`
	AxisPlacement     string           `json:"axisPlacement,omitempty"`
	AxisLabel         string           `json:"axisLabel,omitempty"`
	AxisSoftMin       *float64         `json:"axisSoftMin,omitempty"`
	ScaleDistribution *ScaleDist       `json:"scaleDistribution,omitempty"`
	Stacking          *Stacking        `json:"stacking,omitempty"`
	ThresholdsStyle   *ThresholdsStyle `json:"thresholdsStyle,omitempty"`
	Align             string           `json:"align,omitempty"`       // tables
	CellOptions       *CellOptions     `json:"cellOptions,omitempty"` // tables
}

// ScaleDist is a linear or log axis.
type ScaleDist struct {
	Type string `json:"type"`
	Log  int    `json:"log,omitempty"`
}

// Stacking turns stacking on or off.
type Stacking struct {
	Group string `json:"group"`
	Mode  string `json:"mode"`
}

// ThresholdsStyle is how a graph draws its thresholds: off, line, dashed, area, line+area, dashed+area.
type ThresholdsStyle struct {
	Mode string `json:"mode"`
}

// CellOptions is a table cell's display: auto, color-background, color-text, gauge.
type CellOptions struct {
	Type string `json:"type"`
	Mode string `json:"mode,omitempty"`
}

// Override changes field options for the fields a matcher selects.
type Override struct {
	Matcher    Matcher    `json:"matcher"`
	Properties []Property `json:"properties"`
}

// Matcher selects fields: byName, byRegexp, byFrameRefID.
type Matcher struct {
	ID      string `json:"id"`
	Options string `json:"options"`
}

// Property is one overridden option, e.g. {"id": "custom.lineStyle", "value": {...}}.
type Property struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

// Transformation is one step of a panel's data transformation chain.
type Transformation struct {
	ID      string `json:"id"`
	Options any    `json:"options"`
}

// Legend is the legend of graph panels.
type Legend struct {
	Calcs       []string `json:"calcs"`
	DisplayMode string   `json:"displayMode"` // list, table, hidden
	Placement   string   `json:"placement"`
	ShowLegend  bool     `json:"showLegend"`
}

// Tooltip is the hover tooltip of graph panels.
type Tooltip struct {
	Mode string `json:"mode"` // single, multi
	Sort string `json:"sort"`
}

// TimeseriesOptions are the options of a timeseries panel.
type TimeseriesOptions struct {
	Legend  Legend  `json:"legend"`
	Tooltip Tooltip `json:"tooltip"`
}

// TrendOptions are the options of a trend panel: a graph whose x axis is the number field XField
// (increasing), not time.
type TrendOptions struct {
	XField  string  `json:"xField"`
	Legend  Legend  `json:"legend"`
	Tooltip Tooltip `json:"tooltip"`
}

// BarChartOptions are the options of a barchart panel: categories from XField on the x axis, one bar
// per numeric field.
type BarChartOptions struct {
	XField             string  `json:"xField"`
	Orientation        string  `json:"orientation"`
	GroupWidth         float64 `json:"groupWidth"`
	BarWidth           float64 `json:"barWidth"`
	BarRadius          float64 `json:"barRadius"`
	ShowValue          string  `json:"showValue"`
	Stacking           string  `json:"stacking"`
	XTickLabelRotation int     `json:"xTickLabelRotation"`
	XTickLabelSpacing  int     `json:"xTickLabelSpacing"`
	FullHighlight      bool    `json:"fullHighlight"`
	Legend             Legend  `json:"legend"`
	Tooltip            Tooltip `json:"tooltip"`
}

// ReduceOptions says how stat and bargauge panels reduce a series to one value.
type ReduceOptions struct {
	Calcs  []string `json:"calcs"`
	Fields string   `json:"fields"`
	Values bool     `json:"values"`
}

// StatOptions are the options of a stat panel.
type StatOptions struct {
	ReduceOptions     ReduceOptions `json:"reduceOptions"`
	ColorMode         string        `json:"colorMode"` // value, background, none
	GraphMode         string        `json:"graphMode"` // none, area
	JustifyMode       string        `json:"justifyMode"`
	Orientation       string        `json:"orientation"`
	TextMode          string        `json:"textMode"` // auto, value, value_and_name, name
	WideLayout        bool          `json:"wideLayout"`
	ShowPercentChange bool          `json:"showPercentChange"`
}

// BarGaugeOptions are the options of a bargauge panel.
type BarGaugeOptions struct {
	ReduceOptions ReduceOptions `json:"reduceOptions"`
	DisplayMode   string        `json:"displayMode"` // basic, gradient, lcd
	Orientation   string        `json:"orientation"`
	ShowUnfilled  bool          `json:"showUnfilled"`
	ValueMode     string        `json:"valueMode"`
	NamePlacement string        `json:"namePlacement"`
	Sizing        string        `json:"sizing"`
	MinVizHeight  int           `json:"minVizHeight"`
	MinVizWidth   int           `json:"minVizWidth"`
	MaxVizHeight  int           `json:"maxVizHeight"`
}

// TableOptions are the options of a table panel.
type TableOptions struct {
	ShowHeader bool        `json:"showHeader"`
	CellHeight string      `json:"cellHeight"`
	Footer     TableFooter `json:"footer"`
	SortBy     []TableSort `json:"sortBy,omitempty"`
}

// TableFooter is the (hidden) table footer.
type TableFooter struct {
	Show      bool     `json:"show"`
	Reducer   []string `json:"reducer"`
	CountRows bool     `json:"countRows"`
	Fields    []string `json:"fields"` // Grafana's schema: a list of field names; empty means all
}

// TableSort is a table's initial sort.
type TableSort struct {
	DisplayName string `json:"displayName"`
	Desc        bool   `json:"desc"`
}
