package slo

// The electricity price the reports and the energy collector turn measured
// power into dollars with.

// DefaultPricePerKWh is the electricity price the reports use, in dollars.
const DefaultPricePerKWh = 0.10

const joulesPerKWh = 3.6e6

// CostPerHour is the cost in dollars of drawing watts for one hour.
func CostPerHour(watts, pricePerKWh float64) float64 {
	return watts / 1000 * pricePerKWh
}

// CostPerMillionTokens is the electricity cost in dollars of one million
// tokens at joulesPerToken each.
func CostPerMillionTokens(joulesPerToken, pricePerKWh float64) float64 {
	return joulesPerToken * 1e6 / joulesPerKWh * pricePerKWh
}
