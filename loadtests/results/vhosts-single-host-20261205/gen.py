import sys
n=int(sys.argv[1]); kind=sys.argv[2]; port=int(sys.argv[3])
if kind=='gw':
    print(f'''[server]
workers = 1
io_driver = "io_uring"
log_level = "warn"
[[listeners]]
name = "main"
address = "127.0.0.1:{port}"
''')
    for i in range(n):
        print(f'[[routes]]\nname = "r{i}"\nmatch = {{ host = "h{i}.example.com" }}\ncluster = "origin"\n')
    print('[[routes]]\nname = "all"\nmatch = { path_prefix = "/" }\ncluster = "origin"\n')
    print('[[clusters]]\nname = "origin"\nendpoints = ["127.0.0.1:19000"]')
else:
    print(f'''worker_processes 1;
pid /tmp/rs/nginx.pid;
error_log /tmp/rs/nginx.err warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  server_names_hash_max_size 65536;
  server_names_hash_bucket_size 128;
  upstream o {{ server 127.0.0.1:19000; keepalive 64; }}''')
    for i in range(n):
        print(f'  server {{ listen 127.0.0.1:{port}; server_name h{i}.example.com; location / {{ proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection ""; }} }}')
    print(f'  server {{ listen 127.0.0.1:{port} default_server; location / {{ proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection ""; }} }}')
    print('}')
