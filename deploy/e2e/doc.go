// Package e2e runs the built services as real processes against the local
// Redis, RabbitMQ and PostgreSQL and checks the whole path a buyer takes:
// enter at the gateway, admitted by the dispatcher, order at the
// order-service, events on the exchange.
package e2e
