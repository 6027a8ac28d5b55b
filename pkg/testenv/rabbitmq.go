package testenv

import (
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const startRabbitMQ = `rabbitmq-server -detached   (then wait for: rabbitmqctl await_startup)`

var rabbitContainer = container{server: "rabbitmq"}

// AMQPURL returns the URL of a RabbitMQ that answers, or fails the test:
// AMQP_URL, default amqp://guest:guest@127.0.0.1:5672/, else a container when
// a Docker engine answers.
func AMQPURL(t testing.TB) string {
	t.Helper()
	url := getenv("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	err := pingAMQP(url)
	if err == nil {
		return url
	}
	addr, derr := rabbitContainer.start()
	if derr == nil {
		return "amqp://guest:guest@" + addr + "/"
	}
	t.Fatalf("RabbitMQ is not reachable at AMQP_URL=%s: %v\n"+
		"Start one with:  %s\n"+
		"or point AMQP_URL at one (with a Docker engine the tests start a container; here: %v)", url, err, startRabbitMQ, derr)
	return ""
}

func pingAMQP(url string) error {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	return conn.Close()
}
