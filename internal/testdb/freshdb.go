package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
)

// FreshPostgresDB creates an empty database named prefix_<random> on a
// PostgreSQL server and returns a pgx DSN for it, so that each test has a
// database of its own and tests sharing the server do not collide.
func (s *Server) FreshPostgresDB(ctx context.Context, prefix string) (dsn string, err error) {
	if s.Kind != "postgres" {
		return "", fmt.Errorf("FreshPostgresDB on a %s server", s.Kind)
	}
	var b [6]byte
	rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])
	if err := s.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	u, err := url.Parse(s.AdminDSN)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}
