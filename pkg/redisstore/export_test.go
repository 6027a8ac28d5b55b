package redisstore

// Classify is classify, for the tests of package redisstore_test.
var Classify = classify

// DecodeOutbox reads outbox entries as the relay gets them.
var DecodeOutbox = decodeEvents
