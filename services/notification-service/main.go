// Command notification-service pushes "your turn" to waiting browsers over
// Server-Sent Events, fed by the token events on RabbitMQ.
package main

import (
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/wire"
)

func main() { service.Main("notification-service", wire.New) }
