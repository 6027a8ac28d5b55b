#!/bin/sh
# Runs the broker in the foreground as the rabbitmq user, logging to stdout.
set -e
if [ "$1" = rabbitmq-server ]; then
  export RABBITMQ_LOGS=- HOME=/var/lib/rabbitmq
  exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups /usr/lib/rabbitmq/bin/rabbitmq-server
fi
exec "$@"
