module github.com/waitingroom/waitingroom/deploy/examples

go 1.26.8

require (
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/waitingroom/waitingroom/pkg v0.0.0
	google.golang.org/protobuf v1.36.12
)

replace github.com/waitingroom/waitingroom/pkg => ../../pkg
