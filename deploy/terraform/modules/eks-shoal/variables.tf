variable "name" {
  description = "Name of the cluster and prefix of every resource this module creates."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,30}$", var.name))
    error_message = "name: 2-31 lower-case letters, digits and dashes, starting with a letter."
  }
}

variable "region" {
  description = "AWS region (used in outputs and the bucket's endpoint; the provider is configured by the caller)."
  type        = string
}

variable "vpc_id" {
  description = "VPC the cluster runs in."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets for the control plane and the node groups (at least two availability zones)."
  type        = list(string)
  validation {
    condition     = length(var.subnet_ids) >= 2
    error_message = "subnet_ids: give at least two subnets in different availability zones."
  }
}

variable "kubernetes_version" {
  description = "EKS Kubernetes version."
  type        = string
  default     = "1.32"
}

variable "cpu_instance_types" {
  description = "Instance types of the CPU node group (gateway, CPU worker pools, sink, NATS)."
  type        = list(string)
  default     = ["m7i.2xlarge"]
}

variable "cpu_nodes" {
  description = "Size of the CPU node group."
  type        = object({ min = number, desired = number, max = number })
  default     = { min = 2, desired = 3, max = 10 }
}

variable "gpu_instance_types" {
  description = "Instance types of the GPU spot node group (several types raise the chance of spot capacity)."
  type        = list(string)
  default     = ["g6.2xlarge", "g5.2xlarge", "g6.4xlarge"]
}

variable "gpu_max_nodes" {
  description = "Largest size of the GPU node group. Its minimum is 0: with no GPU pod pending, the cluster autoscaler removes every GPU node."
  type        = number
  default     = 4
}

variable "bucket_name" {
  description = "S3 bucket for Shoal payloads and results; empty = \"<name>-shoal-<account id>\"."
  type        = string
  default     = ""
}

variable "namespace" {
  description = "Kubernetes namespace of the Shoal release."
  type        = string
  default     = "shoal"
}

variable "shoal_chart_path" {
  description = "Path of the Shoal Helm chart (deploy/helm/shoal in the repository)."
  type        = string
}

variable "shoal_values_files" {
  description = "Values files for the release, in order (e.g. the chart's values-aws.yaml)."
  type        = list(string)
  default     = []
}

variable "keda_chart_version" {
  description = "Version of the kedacore/keda chart."
  type        = string
  default     = "2.16.1"
}

variable "nats_chart_version" {
  description = "Version of the nats-io nats chart (JetStream, 3 servers)."
  type        = string
  default     = "1.2.6"
}

variable "nats_store_size" {
  description = "JetStream file store of each NATS server (its volume; the NATS chart makes it max_file_store). Shoal sizes its three streams from it (a quarter each, at most 8 GiB): 32 GiB or more gives them their full size."
  type        = string
  default     = "40Gi"
}

variable "nvidia_device_plugin_chart_version" {
  description = "Version of the NVIDIA k8s-device-plugin chart (advertises nvidia.com/gpu on the GPU nodes)."
  type        = string
  default     = "0.17.1"
}

variable "install_kube_prometheus_stack" {
  description = "Install kube-prometheus-stack (Prometheus Operator CRDs, operator, Prometheus): values-aws.yaml's ServiceMonitor, PrometheusRule and token-backlog triggers use it. false: those two objects are turned off."
  type        = bool
  default     = true
}

variable "kube_prometheus_stack_chart_version" {
  description = "Version of the prometheus-community kube-prometheus-stack chart."
  type        = string
  default     = "66.5.0"
}

variable "tags" {
  description = "Tags added to every AWS resource."
  type        = map(string)
  default     = {}
}
