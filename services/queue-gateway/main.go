// Command queue-gateway serves the waiting room's public REST API: enter,
// position and leave, the queue admin API, and the waiting-room page.
package main

import (
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/wire"
)

func main() { service.Main("queue-gateway", wire.New) }
