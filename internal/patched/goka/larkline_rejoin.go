package goka

import "time"

// larkline patch (D48): Goka v1.1.14 waited 5 s after every consumer group session
// before it joined again, outside the group, which added 5 s to every rebalance (a
// takeover after a member died: 16 s where the franz-go sink took 10). The wait now
// only keeps session starts at least minSessionSpacing apart, as the fixed wait did
// for sessions that end at once; after a session that ran longer the member rejoins
// at once, as Kafka's own clients do.

// minSessionSpacing is the shortest time between two session starts.
const minSessionSpacing = 5 * time.Second

// rejoinWait is how long to wait before the next session, after one that ran for ran.
func rejoinWait(ran time.Duration) time.Duration {
	return max(0, minSessionSpacing-ran)
}
