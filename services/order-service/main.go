// Command order-service takes orders behind entry tokens: each token is
// consumed exactly once, stock never goes below zero, and a failed order gives
// the token back.
package main

import (
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/order-service/internal/wire"
)

func main() { service.Main("order-service", wire.New) }
