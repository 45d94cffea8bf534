// Package backoff holds the two small pieces every retry loop of larkline uses: a
// wait that ends with its context ([Sleep]) and equal jitter ([Jitter]), so that
// retrying instances do not move in step.
//
// The policies themselves (which errors are retried, the bounds, the growth) stay
// with each stage's options; this package only waits.
package backoff
