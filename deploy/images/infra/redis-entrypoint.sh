#!/bin/sh
# As the official image's entrypoint: redis-server without a config file
# gets --protected-mode no, and runs as the redis user.
set -e
if [ "$1" = redis-server ]; then
  shift
  case " $* " in *" --protected-mode "*) ;; *) set -- --protected-mode no "$@" ;; esac
  exec setpriv --reuid=redis --regid=redis --init-groups redis-server "$@"
fi
exec "$@"
