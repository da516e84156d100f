"""The grading sandbox proven in a real Debian 12 guest (make test-hosts): see guest.py."""
