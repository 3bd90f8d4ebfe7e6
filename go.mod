module github.com/profinfer/profinfer

go 1.26.8
