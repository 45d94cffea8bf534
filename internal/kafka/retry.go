package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// IsRetryable reports whether the operation that failed with err may succeed if tried
// again unchanged, later. It is the one retry decision for Kafka I/O in larkline.
//
// Retryable:
//   - Kafka error codes the protocol marks retriable (kerr.Error.Retriable: leader
//     changes, not enough replicas, coordinator loading, request timed out, ...), and
//     sarama's KError of the same codes;
//   - franz-go's producer give-ups that describe a transient state: kgo.ErrRecordTimeout,
//     kgo.ErrRecordRetries, kgo.ErrMaxBuffered; sarama's ErrOutOfBrokers,
//     ErrNotConnected and ErrControllerNotAvailable;
//   - network failures: timeouts, refused or reset connections, a broker closing the
//     connection (io.EOF, io.ErrUnexpectedEOF), and whatever franz-go itself would
//     retry against a broker (kgo.IsRetryableBrokerErr);
//   - context.DeadlineExceeded: the attempt ran out of time, a later one may not.
//
// Not retryable:
//   - context.Canceled: the caller is shutting down, or gave up;
//   - kgo.ErrClientClosed, sarama.ErrClosedClient and sarama.ErrShuttingDown;
//   - non-retriable Kafka codes (authorization and authentication failures, invalid
//     records, record too large, unknown producer id after expiry, ...);
//   - TLS certificate failures, and anything unknown.
//
// An error that wraps several (errors.Join) is retryable only if every wrapped
// error is; context.Canceled anywhere makes it not retryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs := j.Unwrap()
		if len(errs) == 0 {
			return false
		}
		for _, e := range errs {
			if !IsRetryable(e) {
				return false
			}
		}
		return true
	}
	switch {
	case errors.Is(err, kgo.ErrClientClosed),
		errors.Is(err, kgo.ErrAborting),
		errors.Is(err, sarama.ErrClosedClient),
		errors.Is(err, sarama.ErrShuttingDown):
		return false
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, kgo.ErrRecordTimeout),
		errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, kgo.ErrMaxBuffered),
		errors.Is(err, sarama.ErrOutOfBrokers),
		errors.Is(err, sarama.ErrNotConnected),
		errors.Is(err, sarama.ErrControllerNotAvailable):
		return true
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Retriable
	}
	if se, ok := errors.AsType[sarama.KError](err); ok {
		return kerr.IsRetriable(kerr.ErrorForCode(int16(se)))
	}
	if isCertificateErr(err) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		// A dial or read failure whose cause is none of the above (a DNS hiccup, a
		// closed connection): the network may come back.
		if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.IsNotFound {
			return false
		}
		return true
	}
	return kgo.IsRetryableBrokerErr(err)
}

func isCertificateErr(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return true
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	_, ok := errors.AsType[tls.RecordHeaderError](err)
	return ok
}
