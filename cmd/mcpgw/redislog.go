package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// redisLogger carries go-redis' own messages (a dial that failed, a pool
// that gave up) into the process log at debug level. Left alone, go-redis
// prints them unstructured to stderr many times a second while Redis is
// down; the gateway's Redis health watcher already reports that once per
// change, structured and at warn (docs/operations.md).
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if ce := l.log.Check(zap.DebugLevel, "go-redis"); ce != nil {
		ce.Write(zap.String("message", fmt.Sprintf(format, v...)))
	}
}

// useRedisLogger routes go-redis' logging, which is process-wide in that
// library, to log. Only the mcpgw process calls it, once, at start.
func useRedisLogger(log *zap.Logger) {
	redis.SetLogger(redisLogger{log.Named("redis")})
}
