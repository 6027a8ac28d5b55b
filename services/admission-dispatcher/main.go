// Command admission-dispatcher admits the head of every waiting line at the
// queue's rate, under a fenced per-queue lease, relays the admission events
// to RabbitMQ and gives tokens back when orders fail.
package main

import (
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/wire"
)

func main() { service.Main("admission-dispatcher", wire.New) }
