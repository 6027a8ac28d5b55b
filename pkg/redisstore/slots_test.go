package redisstore

import (
	"strings"
	"testing"
)

// crc16 is the CRC16/XMODEM Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is a key's cluster slot, honouring the {hash tag} rule.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16([]byte(key)) % 16384
}

func TestCRC16MatchesRedis(t *testing.T) {
	// Reference values from the Redis Cluster specification and CLUSTER KEYSLOT.
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	if got := slot("foo"); got != 12182 {
		t.Fatalf("slot(foo) = %d, want 12182", got)
	}
	if got, want := slot("{user1000}.following"), slot("{user1000}.followers"); got != want {
		t.Fatalf("hash tags: %d != %d", got, want)
	}
}

func TestEveryScriptsKeysShareOneSlot(t *testing.T) {
	queues := []string{"a", "sale-2026", "0", "x-y-z-123", strings.Repeat("q", 64)}
	users := []string{"u1", "user@example.com", "a:b.c_d-e", strings.Repeat("U", 128)}
	for _, q := range queues {
		k := KeysFor(q)
		for _, u := range users {
			sets := map[string][]string{
				"enter":    k.enterKeys(u, "0123456789abcdef0123456789abcdef"),
				"enter-np": k.enterKeys(u, ""),
				"check":    k.checkKeys(u),
				"position": k.positionKeys(u),
				"leave":    k.leaveKeys(u),
				"stats":    k.statsKeys(),
				"close":    k.closeKeys(),
				"lease":    k.leaseKeys(),
				"issue":    append(k.issueKeys(), k.Prefix()+"token:"+u, k.Prefix()+"status:"+u, k.PreQueue(), k.Draw()),
				"consume":  k.consumeKeys(u),
				"settle":   k.settleKeys(u),
				"restore":  k.restoreKeys(u),
				"draw":     k.drawKeys(),
				"texts":    k.textsKeys(),
				"push":     append(k.pushKeys(u), k.Pushed("t:"+u)),
				"all":      {k.Config(), k.Waiting(), k.Seq(), k.Token(u), k.Status(u), k.Active(), k.Inflight(), k.Consumed(u), k.Spent(u), k.Dispatch(), k.Lock(), k.Outbox(), k.PreQueue(), k.Draw(), k.Left()},
			}
			for name, keys := range sets {
				want := slot(keys[0])
				if want != crc16([]byte(q))%16384 {
					t.Fatalf("%s: slot of %s is not the queue id's", name, keys[0])
				}
				for _, key := range keys[1:] {
					if got := slot(key); got != want {
						t.Errorf("script %s queue %q user %q: key %s in slot %d, first key in %d", name, q, u, key, got, want)
					}
				}
			}
		}
	}
}
