package queue

import (
	"math"
	"time"
)

// WaitBuckets is how many buckets a wait histogram has (lua/prelude.lua,
// wait_bucket, is the same table): bucket 0 is under 100 ms, bucket i >= 1
// is [100 ms * 2^((i-1)/4), 100 ms * 2^(i/4)), four to a doubling, and the
// last is open above (from about 5 hours).
const WaitBuckets = 72

// WaitBucketLow is where bucket i starts.
func WaitBucketLow(i int) time.Duration {
	if i <= 0 {
		return 0
	}
	return bucketBound(i - 1)
}

// WaitBucketHigh is where bucket i ends (exclusive); the last bucket's is
// its start's next bound, for an estimate only.
func WaitBucketHigh(i int) time.Duration {
	return bucketBound(max(i, 0))
}

func bucketBound(k int) time.Duration {
	ms := 100 * math.Pow(2, float64(k)/4)
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}

// WaitQuantile estimates the q-quantile (0 < q <= 1) of the waits counted
// in hist (per bucket): the geometric middle of the bucket the quantile
// falls in (bucket 0's middle is 50 ms), so within 10 % of the true wait
// for waits of 100 ms and more; never more than longest, the longest wait
// (0: unknown). 0 for an empty histogram.
func WaitQuantile(hist []int64, q float64, longest time.Duration) time.Duration {
	var total int64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	rank = min(max(rank, 1), total)
	var seen int64
	for i, n := range hist {
		seen += n
		if seen < rank {
			continue
		}
		mid := 50 * time.Millisecond
		if i > 0 {
			mid = time.Duration(math.Sqrt(float64(WaitBucketLow(i)) * float64(WaitBucketHigh(i))))
		}
		if longest > 0 && mid > longest {
			mid = longest
		}
		return mid
	}
	return longest
}
