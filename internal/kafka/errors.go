package kafka

import "errors"

// ErrInvalidOptions is returned (wrapped) when Options, GokaOptions, GroupConsumer,
// TopicSpec or LagOptions fail validation. The wrapping message names the field.
var ErrInvalidOptions = errors.New("invalid kafka options")

// ErrTopicMismatch is returned (wrapped) by Report.Err when an existing topic differs
// from its specification. EnsureTopics itself returns the Report and no error for a
// mismatch: it never changes an existing topic, it only says what differs.
var ErrTopicMismatch = errors.New("kafka topic does not match its specification")
