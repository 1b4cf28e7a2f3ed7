package wechat

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/parleyhq/parley/channels"
)

// wecomMedia is an image or file of a WeCom AI-bot message.
type wecomMedia struct {
	URL      string `json:"url"`
	AESKey   string `json:"aeskey"`
	FileName string `json:"filename"`
}

// wecomAttachments lists the images (of an image or mixed message) and the
// file of an aibot_msg_callback body. The attachment id is the message id
// and the item's place in it.
func wecomAttachments(body json.RawMessage, msgID string) []channels.Attachment {
	var b struct {
		MsgType string      `json:"msgtype"`
		Image   *wecomMedia `json:"image"`
		File    *wecomMedia `json:"file"`
		Mixed   struct {
			Items []struct {
				MsgType string      `json:"msgtype"`
				Image   *wecomMedia `json:"image"`
			} `json:"msg_item"`
		} `json:"mixed"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil
	}
	var out []channels.Attachment
	add := func(kind string, m *wecomMedia) {
		if m == nil || m.URL == "" {
			return
		}
		out = append(out, channels.Attachment{
			Kind: kind, ID: msgID + "#" + strconv.Itoa(len(out)), Name: m.FileName,
			Meta: map[string]string{attachVia: ViaWeCom, attachURL: m.URL, attachAESKey: m.AESKey},
		})
	}
	switch b.MsgType {
	case "image":
		add(channels.AttachmentImage, b.Image)
	case "file":
		add(channels.AttachmentFile, b.File)
	case "mixed":
		for _, it := range b.Mixed.Items {
			if it.MsgType == "image" {
				add(channels.AttachmentImage, it.Image)
			}
		}
	}
	return out
}

// ilinkCDNMedia is the media reference of an iLink item.
type ilinkCDNMedia struct {
	EncryptQueryParam string `json:"encrypt_query_param"`
	AESKey            string `json:"aes_key"`
}

// ilinkAttachments lists the image and file items of an iLink message.
// Items whose key does not decode are left out (the text, if any, is
// still answered).
func ilinkAttachments(raw json.RawMessage, msgID string) []channels.Attachment {
	var m struct {
		Items []struct {
			Type      int `json:"type"`
			ImageItem *struct {
				Media  ilinkCDNMedia `json:"media"`
				AESKey string        `json:"aeskey"`
			} `json:"image_item"`
			FileItem *struct {
				Media    ilinkCDNMedia `json:"media"`
				FileName string        `json:"file_name"`
				Len      string        `json:"len"`
			} `json:"file_item"`
		} `json:"item_list"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var out []channels.Attachment
	add := func(kind string, media ilinkCDNMedia, hexKey, name string, size int64) {
		key, err := ilinkMediaKey(hexKey, media.AESKey)
		if err != nil || media.EncryptQueryParam == "" {
			return
		}
		out = append(out, channels.Attachment{
			Kind: kind, ID: msgID + "#" + strconv.Itoa(len(out)), Name: name, Size: size,
			Meta: map[string]string{attachVia: ViaILink, attachParam: media.EncryptQueryParam,
				attachAESKey: base64.StdEncoding.EncodeToString(key)},
		})
	}
	for _, it := range m.Items {
		switch {
		case it.Type == ilinkItemImage && it.ImageItem != nil:
			add(channels.AttachmentImage, it.ImageItem.Media, it.ImageItem.AESKey, "", 0)
		case it.Type == ilinkItemFile && it.FileItem != nil:
			size, _ := strconv.ParseInt(it.FileItem.Len, 10, 64)
			add(channels.AttachmentFile, it.FileItem.Media, "", it.FileItem.FileName, max(size, 0))
		}
	}
	return out
}
