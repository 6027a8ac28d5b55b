package broker

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// scheme matches the start of a URL.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// splitURLs parses AMQP_URL: one amqp:// or amqps:// URL, or one per
// cluster node separated by commas. A new URL starts only where a comma is
// followed by a scheme ("x://"), so a comma in a password needs no
// escaping. It returns the URLs and their host:port for logs (never the
// credentials).
func splitURLs(list string) (urls, addrs []string, err error) {
	for _, part := range strings.Split(list, ",") {
		p := strings.TrimSpace(part)
		if len(urls) > 0 && !scheme.MatchString(p) {
			urls[len(urls)-1] += "," + part
			continue
		}
		urls = append(urls, p)
	}
	for i, u := range urls {
		uri, err := amqp.ParseURI(u)
		if err != nil {
			if len(urls) == 1 {
				return nil, nil, fmt.Errorf("broker: AMQP URL: %w", err)
			}
			return nil, nil, fmt.Errorf("broker: AMQP URL %d of %d: %w", i+1, len(urls), err)
		}
		addrs = append(addrs, net.JoinHostPort(uri.Host, fmt.Sprint(uri.Port)))
	}
	if len(urls) == 0 {
		return nil, nil, errors.New("broker: AMQP URL is empty")
	}
	return urls, addrs, nil
}
