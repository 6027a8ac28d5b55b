module github.com/waitingroom/waitingroom/deploy/bench/bare

go 1.26.8
