// Package messages holds the plain structs that cross a boundary: metastore
// commands and records (metastore.go), the messages partition actors take
// (partition.go), and later the NATS wire messages. One file per protocol, no
// behaviour beyond encoding. Start with metastore.go.
package messages
