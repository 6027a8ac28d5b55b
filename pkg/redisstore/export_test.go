package redisstore

// Classify is classify, for the tests of package redisstore_test.
var Classify = classify
