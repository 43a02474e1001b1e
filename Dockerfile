FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 FEDWEB_DATA_DIR=/data
WORKDIR /app

# g++: compiled training steps are C++ kernels (compute.compile); without it runs train eagerly.
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*

COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
RUN useradd --create-home --uid 1000 fedweb && mkdir -p /data && chown fedweb /data
USER fedweb
VOLUME /data
EXPOSE 8000

# $FEDWEB_WEB_PROCESSES daphne processes behind one port (scripts/serve.py; 1 unless set)
CMD ["python", "-m", "scripts.serve", "-b", "0.0.0.0", "-p", "8000"]
