package redisstore

import (
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestNewClientSingleNode(t *testing.T) {
	c, err := NewClient("redis://:pw@10.0.0.1:6380/3?pool_size=7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("client is %T, want *redis.Client", c)
	}
	o := rc.Options()
	if o.Addr != "10.0.0.1:6380" || o.DB != 3 || o.Password != "pw" || o.PoolSize != 7 {
		t.Fatalf("options = addr %s db %d password %q pool %d", o.Addr, o.DB, o.Password, o.PoolSize)
	}
	if o.ReadTimeout != defaultReadTimeout || o.DialTimeout != defaultDialTimeout {
		t.Fatalf("timeouts = dial %v read %v, want our defaults", o.DialTimeout, o.ReadTimeout)
	}
}

func TestNewClientKeepsTimeoutsFromURL(t *testing.T) {
	c, err := NewClient("redis://localhost:6379/0?read_timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.(*redis.Client).Options().ReadTimeout; got != 3*time.Second {
		t.Fatalf("read timeout = %v, want 3s", got)
	}
}

func TestNewClientCluster(t *testing.T) {
	for _, url := range []string{
		"h1:7000,h2:7001,h3:7002",
		"redis://h1:7000,redis://h2:7001,redis://h3:7002",
		"redis+cluster://h1:7000,h2:7001,h3:7002",
	} {
		t.Run(url, func(t *testing.T) {
			c, err := NewClient(url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cc, ok := c.(*redis.ClusterClient)
			if !ok {
				t.Fatalf("client is %T, want *redis.ClusterClient", c)
			}
			if got, want := cc.Options().Addrs, []string{"h1:7000", "h2:7001", "h3:7002"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("addrs = %v, want %v", got, want)
			}
		})
	}
}

func TestNewClientSentinel(t *testing.T) {
	opt, err := parseSentinel("redis+sentinel://:spw@s1:26379,s2:26380/mymaster/2")
	if err != nil {
		t.Fatal(err)
	}
	if opt.MasterName != "mymaster" || opt.DB != 2 || opt.SentinelPassword != "spw" {
		t.Fatalf("master %q db %d sentinel password %q", opt.MasterName, opt.DB, opt.SentinelPassword)
	}
	if want := []string{"s1:26379", "s2:26380"}; !reflect.DeepEqual(opt.SentinelAddrs, want) {
		t.Fatalf("sentinels = %v, want %v", opt.SentinelAddrs, want)
	}
}

func TestNewClientRejects(t *testing.T) {
	for _, url := range []string{"", "http://x:1", "redis+sentinel://s1:26379", "redis+cluster://h1:1,h2:2/5"} {
		if c, err := NewClient(url); err == nil {
			c.Close()
			t.Errorf("NewClient(%q) succeeded, want an error", url)
		}
	}
}
