package queue

// BypassStanding is what anyone in queue q (configured cfg) is told while
// Redis cannot be reached and q fails OPEN: go straight to the order form,
// where each order-service replica holds q's orders to its admission rate.
func BypassStanding(q string, cfg Config) Standing {
	return Standing{QueueID: q, State: Bypass, QueueState: cfg.State, ConfiguredRate: cfg.AdmissionRatePerSec}
}
